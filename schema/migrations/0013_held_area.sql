-- Upgrade: adds the held area (tier 0, a partition a month) where the unfinished messages of an expired period move, with all their deliveries, so that the period's partitions can drop; and the partitions an interface's stored messages move to when its tier changes
-- Heavy: none

-- Catalog changes only, but each needs its table's strongest lock: rather
-- than queue every insert behind a long report, give up (the start fails,
-- saying so, and is tried again).
SET LOCAL lock_timeout = '10s';

-- Tier 0 is the held area. The CHECKs of migration 0001 allowed only the
-- three retention tiers; LIST partitioning still refuses any tier without
-- a partition, so nothing but 0, 7, 21 and 49 can be stored. Relaxing a
-- CHECK takes nothing away from a binary from before this migration: it
-- never writes tier 0, and it reads held rows as any other (they stay in
-- the destination's queue index, in id order).
ALTER TABLE messages DROP CONSTRAINT messages_tier_check;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_tier_check;

CREATE TABLE messages_t0 PARTITION OF messages FOR VALUES IN (0) PARTITION BY RANGE (received_at);
CREATE TABLE deliveries_t0 PARTITION OF deliveries FOR VALUES IN (0) PARTITION BY RANGE (received_at);

-- Creates the held partition of one table for the calendar month (UTC) that
-- holds `day`, named <parent>_t0_<YYYYMM01>, in the caller's transaction
-- (one table per transaction, as ductus_ensure_partitions: holding messages
-- and deliveries together deadlocked with settling). Waits at most wait_ms
-- for the parent's lock. Answers whether it created the table.
CREATE FUNCTION ductus_ensure_held_partition(parent text, day date, wait_ms integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  lo date := date_trunc('month', day)::date;
  name text;
BEGIN
  IF parent NOT IN ('messages', 'deliveries') THEN
    RAISE EXCEPTION 'ductus_ensure_held_partition: unknown table %', parent;
  END IF;
  name := format('%s_t0_%s', parent, to_char(lo, 'YYYYMMDD'));
  IF to_regclass(name) IS NOT NULL THEN
    RETURN false;
  END IF;
  PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                 name, parent || '_t0',
                 (lo::timestamp AT TIME ZONE 'UTC'),
                 ((lo + interval '1 month')::date::timestamp AT TIME ZONE 'UTC'));
  RETURN true;
END $$;

-- Creates the missing periods of one table and retention tier over the
-- `days` before today (UTC) that are not over yet (their drop day is still
-- to come), named as ductus_ensure_partitions names them,
-- in the caller's transaction: where an interface's stored messages move
-- when its tier changes (the engine makes only today's and the coming
-- days'). Unlike ductus_ensure_partitions it never waits longer than
-- wait_ms for the parent's lock: nothing new is stored there. Answers how
-- many it created.
CREATE FUNCTION ductus_ensure_window(parent text, tier smallint, days integer, wait_ms integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  today date := (now() AT TIME ZONE 'UTC')::date;
  day date := today - days;
  lo date;
  hi date;
  name text;
  created integer := 0;
BEGIN
  IF parent NOT IN ('messages', 'deliveries') OR tier NOT IN (7, 21, 49) THEN
    RAISE EXCEPTION 'ductus_ensure_window: unknown table % or tier %', parent, tier;
  END IF;
  PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
  WHILE day <= today LOOP
    IF tier = 7 THEN
      lo := day;
      hi := day + 1;
    ELSE
      lo := date_trunc('week', day)::date;
      hi := lo + 7;
    END IF;
    name := format('%s_t%s_%s', parent, tier, to_char(lo, 'YYYYMMDD'));
    -- A period already over would only be dropped again by the next run.
    IF hi + tier > today AND to_regclass(name) IS NULL THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                     name, parent || '_t' || tier,
                     (lo::timestamp AT TIME ZONE 'UTC'), (hi::timestamp AT TIME ZONE 'UTC'));
      created := created + 1;
    END IF;
    day := hi;
  END LOOP;
  RETURN created;
END $$;
