-- Upgrade: adds the destinations an operator paused, so a pause outlives an engine restart
-- Heavy: none

-- One row per paused destination: when and by whom it was first paused,
-- and every reason given, oldest first ([{"at", "by", "reason"}]): pausing
-- again adds a reason and keeps the first time and author. Resuming deletes
-- the row (the audit log keeps the history).
CREATE TABLE destination_pauses (
  destination_id bigint PRIMARY KEY REFERENCES destinations (id),
  paused_at timestamptz NOT NULL DEFAULT now(),
  paused_by text NOT NULL,
  reasons jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(reasons) = 'array')
);
