-- Upgrade: adds the key of each engine's ownership lock to engines, so an engine tells a live one (its session advisory lock granted in pg_locks) from a dead one without waiting out a timeout
-- Heavy: none

-- The session advisory lock (pg_advisory_lock(lock_key)) the engine holds
-- on a connection of its own for as long as it runs: alive = that lock is
-- granted. NULL: a row no engine can prove alive (treated as dead).
-- heartbeat_at (0002) stays unused: nothing waits on a clock.
ALTER TABLE engines ADD COLUMN lock_key bigint;

-- Stopped engines are kept a while for the record; the live ones are read
-- at every claim and every 2 s by each running engine.
CREATE INDEX engines_running ON engines (id) WHERE stopped_at IS NULL;
