-- Upgrade: adds the interfaces whose intake an operator stopped, so a stop outlives an engine restart
-- Heavy: none

-- One row per interface whose intake an operator stopped (POST
-- /api/v1/interfaces/{name}/stop): its listener stays closed, its files and
-- schedules are not polled, until POST .../start deletes the row (the audit
-- log keeps the history). Keyed by the interface's name, not interfaces.id:
-- a respond-mode HTTP interface has no row there (it stores nothing), and
-- its intake is stopped all the same.
CREATE TABLE interface_stops (
  interface text PRIMARY KEY,
  stopped_at timestamptz NOT NULL DEFAULT now(),
  stopped_by text NOT NULL,
  reason text
);
