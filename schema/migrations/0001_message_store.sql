-- Upgrade: creates the registry of interfaces and destinations, messages and deliveries (partitioned by retention tier, then by day for 1w and by week for 3w/7w), dedupe keys, source state and the partition-maintenance function
-- Heavy: none

-- Names are registered once and referred to by id everywhere else.
CREATE TABLE interfaces (
  id bigserial PRIMARY KEY,
  name text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE destinations (
  id bigserial PRIMARY KEY,
  interface_id bigint NOT NULL REFERENCES interfaces (id),
  name text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (interface_id, name)
);

-- One sequence for every tier: ids order messages across tiers and
-- partitions, and the queue reads in id order.
CREATE SEQUENCE messages_id_seq AS bigint;

-- status: 0 pending, 1 sent, 2 filtered, 3 quarantined, 4 duplicate. The
-- primary key carries the partition columns, as Postgres requires.
CREATE TABLE messages (
  id bigint NOT NULL DEFAULT nextval('messages_id_seq'),
  tier smallint NOT NULL CHECK (tier IN (7, 21, 49)),
  received_at timestamptz NOT NULL DEFAULT now(),
  interface_id bigint NOT NULL,
  partition_key integer NOT NULL DEFAULT 0,
  dedupe_key text,
  status smallint NOT NULL DEFAULT 0 CHECK (status BETWEEN 0 AND 4),
  last_error text,
  origin_id bigint,
  payload bytea NOT NULL,
  PRIMARY KEY (id, tier, received_at)
) PARTITION BY LIST (tier);
ALTER SEQUENCE messages_id_seq OWNED BY messages.id;

-- Pending messages of an interface (with_waiting's loose scan, the schedules'
-- "still pending" check, reconcile).
CREATE INDEX messages_pending ON messages (interface_id, partition_key, id) WHERE status = 0;

-- One row per queued message and destination, in the message's tier and
-- time partition (same bounds as its messages partition).
CREATE TABLE deliveries (
  message_id bigint NOT NULL,
  destination_id bigint NOT NULL,
  tier smallint NOT NULL CHECK (tier IN (7, 21, 49)),
  received_at timestamptz NOT NULL,
  partition_key integer NOT NULL DEFAULT 0,
  status smallint NOT NULL DEFAULT 0 CHECK (status BETWEEN 0 AND 3),
  attempts integer NOT NULL DEFAULT 0,
  last_error text,
  output bytea,
  updated_at timestamptz,
  PRIMARY KEY (message_id, destination_id, tier, received_at)
) PARTITION BY LIST (tier);

-- Each destination's queue in message order: a read of 50 stops after 50
-- matching rows whatever the backlog, and delivered rows are not in it. With
-- the lane second Postgres would sort a lane set's whole backlog instead.
CREATE INDEX deliveries_queue ON deliveries (destination_id, message_id, partition_key)
  WHERE status = 0;

CREATE TABLE messages_t7 PARTITION OF messages FOR VALUES IN (7) PARTITION BY RANGE (received_at);
CREATE TABLE messages_t21 PARTITION OF messages FOR VALUES IN (21) PARTITION BY RANGE (received_at);
CREATE TABLE messages_t49 PARTITION OF messages FOR VALUES IN (49) PARTITION BY RANGE (received_at);
CREATE TABLE deliveries_t7 PARTITION OF deliveries FOR VALUES IN (7) PARTITION BY RANGE (received_at);
CREATE TABLE deliveries_t21 PARTITION OF deliveries FOR VALUES IN (21) PARTITION BY RANGE (received_at);
CREATE TABLE deliveries_t49 PARTITION OF deliveries FOR VALUES IN (49) PARTITION BY RANGE (received_at);

-- Claimed in the same statement as the message insert (one commit).
CREATE TABLE dedupe_keys (
  interface_id bigint NOT NULL,
  key text NOT NULL,
  message_id bigint NOT NULL,
  seen_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (interface_id, key)
);
CREATE INDEX dedupe_keys_seen_at ON dedupe_keys (seen_at);

-- What sources remember (file progress, schedules), written in the same
-- transaction as the messages it accounts for.
CREATE TABLE source_state (
  interface_id bigint NOT NULL REFERENCES interfaces (id),
  key text NOT NULL,
  value jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (interface_id, key)
);

-- Creates the missing time partitions of one table and tier from first_day
-- through first_day + days_ahead, in the caller's transaction (one table and
-- tier per transaction: holding messages and deliveries together deadlocked
-- with settling, two tiers together with queries). Existing partitions are
-- seen in the catalog without taking any lock. It waits at most wait_ms for
-- the parent's lock, unless tomorrow's partition is missing: then it waits as
-- long as it takes, since new messages need somewhere to go. waited = true
-- when that happened to a table that already had today's partition (earlier
-- tries were blocked; on a fresh database it is just the first run).
CREATE FUNCTION ductus_ensure_partitions(parent text, tier smallint, first_day date,
                                         days_ahead integer, wait_ms integer,
                                         OUT created integer, OUT waited boolean)
LANGUAGE plpgsql AS $$
DECLARE
  day date := coalesce(first_day, (now() AT TIME ZONE 'UTC')::date);
  lo date;
  hi date;
  name text;
  tomorrow_lo date;
  today_lo date;
  tomorrow_missing boolean;
BEGIN
  IF parent NOT IN ('messages', 'deliveries') OR tier NOT IN (7, 21, 49) THEN
    RAISE EXCEPTION 'ductus_ensure_partitions: unknown table % or tier %', parent, tier;
  END IF;
  created := 0;
  tomorrow_lo := CASE WHEN tier = 7 THEN day + 1 ELSE date_trunc('week', day + 1)::date END;
  tomorrow_missing := to_regclass(format('%s_t%s_%s', parent, tier,
                                         to_char(tomorrow_lo, 'YYYYMMDD'))) IS NULL;
  PERFORM set_config('lock_timeout', CASE WHEN tomorrow_missing THEN '0' ELSE wait_ms || 'ms' END,
                     true);
  today_lo := CASE WHEN tier = 7 THEN day ELSE date_trunc('week', day)::date END;
  waited := tomorrow_missing AND to_regclass(format('%s_t%s_%s', parent, tier,
                                                    to_char(today_lo, 'YYYYMMDD'))) IS NOT NULL;
  WHILE day <= coalesce(first_day, (now() AT TIME ZONE 'UTC')::date) + days_ahead LOOP
    IF tier = 7 THEN
      lo := day;
      hi := day + 1;
    ELSE
      lo := date_trunc('week', day)::date;  -- Monday
      hi := lo + 7;
    END IF;
    name := format('%s_t%s_%s', parent, tier, to_char(lo, 'YYYYMMDD'));
    IF to_regclass(name) IS NULL THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                     name, parent || '_t' || tier,
                     (lo::timestamp AT TIME ZONE 'UTC'), (hi::timestamp AT TIME ZONE 'UTC'));
      created := created + 1;
    END IF;
    day := hi;
  END LOOP;
  IF created = 0 THEN
    waited := false;
  END IF;
END $$;
