-- Upgrade: adds the engines running on this database and which engine owns each interface's queue
-- Heavy: none

CREATE TABLE engines (
  id text PRIMARY KEY,
  host text NOT NULL,
  pid integer NOT NULL,
  version text NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  stopped_at timestamptz
);

-- Nothing may read an interface's queue or change its rows before its
-- engine has claimed it here.
CREATE TABLE interface_owners (
  interface_id bigint PRIMARY KEY REFERENCES interfaces (id),
  engine_id text NOT NULL REFERENCES engines (id),
  claimed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX interface_owners_engine ON interface_owners (engine_id);
