-- Upgrade: adds the traffic kept per minute for each interface and destination (received, sent, filtered, quarantined), 30 days of it, for the console's charts and GET /interfaces/{name}/stats
-- Heavy: none

-- One row per interface intake (destination_id 0) or destination and
-- minute with something in it; nothing is written for a quiet minute.
-- The engine adds its counts once a minute in one statement whatever the
-- volume (supervisor/monitor/traffic_rollup.h), with ON CONFLICT adding to
-- what is there: two engines, or a restart within the minute, add up
-- rather than overwrite. A crash loses at most the minute in progress:
-- these are figures for a chart, not messages. Rows older than 30 days
-- are deleted by the same task, an hour's worth at a time.
CREATE TABLE traffic_minutes (
  interface_id   bigint NOT NULL REFERENCES interfaces (id),
  destination_id bigint NOT NULL DEFAULT 0,
  minute         timestamptz NOT NULL,
  received       bigint NOT NULL DEFAULT 0,
  sent           bigint NOT NULL DEFAULT 0,
  filtered       bigint NOT NULL DEFAULT 0,
  quarantined    bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (interface_id, destination_id, minute)
);
CREATE INDEX traffic_minutes_minute ON traffic_minutes (minute);
