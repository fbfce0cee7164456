-- Upgrade: adds the engine's events (AR refusals, deliveries given up after their retries, worker restarts, runaways, intake stops and starts, alerts fired and resolved), a bounded table read by GET /api/v1/event-log and the console's Events page
-- Heavy: none

-- One row per event. The engine writes them in batches, one statement for
-- up to 1,000 rows (supervisor/monitor/event_recorder.h), and keeps the
-- table bounded itself: rows past events.keep (30 days) and beyond the
-- newest events.max_rows (100,000) are deleted, oldest first. An event
-- still in the engine's memory at a crash is lost: these are notes for a
-- person, never messages. Interfaces and destinations are kept by name,
-- not by id: a respond-mode interface has no interfaces row, and a row
-- outlives a renamed or removed interface as it happened.
CREATE TABLE events (
  id          bigserial PRIMARY KEY,
  at          timestamptz NOT NULL,
  kind        text NOT NULL,
  interface   text,
  destination text,
  message_id  bigint,
  detail      text NOT NULL DEFAULT ''
);
-- Newest first, per kind or per interface: the page's filters.
CREATE INDEX events_kind ON events (kind, id);
CREATE INDEX events_interface ON events (interface, id) WHERE interface IS NOT NULL;
-- The purge by age.
CREATE INDEX events_at ON events (at);
