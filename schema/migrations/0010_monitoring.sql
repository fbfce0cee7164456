-- Upgrade: adds what monitoring keeps: each interface's and destination's last activity and trend baselines (so a restart doesn't forget when something last arrived), the alerts with their history, and the outbox of their e-mails and webhooks
-- Heavy: none

-- Last activity, saved by the engine every few seconds (schema/activity_store.h).
-- Times only move forward (the save keeps the later of the stored and the
-- new), so two engines on one database never undo each other.
-- watched_since: when the engine first watched the interface: a quiet or
-- late interface is judged from there when nothing was ever received.
CREATE TABLE interface_activity (
  interface_id bigint PRIMARY KEY REFERENCES interfaces (id),
  last_received timestamptz,
  watched_since timestamptz
);

-- baseline_in / baseline_send_ms: one value per hour of the week (168,
-- Monday 00:00 first, NULL where nothing was seen yet): messages in per
-- hour and the typical send time, the trends the judge compares against.
CREATE TABLE destination_activity (
  destination_id bigint PRIMARY KEY REFERENCES destinations (id),
  last_sent timestamptz,
  last_error timestamptz,
  last_error_text text,
  baseline_in float8[],
  baseline_send_ms float8[]
);

-- One row per alert subject ("adt-in", "adt-in/lab", "certificate:server"),
-- shared by every engine on the database: a step applies only to the rev
-- it read (compare-and-set), so two engines judging the same fact make one
-- alert and one notification. phase, state and severity are the names of
-- common/monitor (firing, stalled, critical...).
CREATE TABLE alert_state (
  id bigserial PRIMARY KEY,
  subject text NOT NULL UNIQUE,
  interface_name text NOT NULL DEFAULT '',
  destination_name text NOT NULL DEFAULT '',
  certificate_name text NOT NULL DEFAULT '',
  phase text NOT NULL,
  state text NOT NULL,
  severity text NOT NULL,
  opened_at timestamptz,
  changed_at timestamptz,
  good_since timestamptz,
  remind_at timestamptz,
  acknowledged_at timestamptz,
  acknowledged_by text NOT NULL DEFAULT '',
  silenced_until timestamptz,
  silenced_by text NOT NULL DEFAULT '',
  told boolean NOT NULL DEFAULT false,
  stage integer NOT NULL DEFAULT 0,
  rev bigint NOT NULL DEFAULT 1
);

-- Every change of an alert (fired, escalated, recovered, acknowledged,
-- silenced...), newest read first by the API; purged after the history's keep.
CREATE TABLE alert_events (
  id bigserial PRIMARY KEY,
  alert_id bigint NOT NULL REFERENCES alert_state (id),
  at timestamptz NOT NULL DEFAULT now(),
  change text NOT NULL,
  phase text NOT NULL,
  state text NOT NULL,
  severity text NOT NULL,
  reason text NOT NULL DEFAULT ''
);
CREATE INDEX alert_events_alert ON alert_events (alert_id, id);
CREATE INDEX alert_events_at ON alert_events (at);

-- The outbox: one row per notification to send (an e-mail to a channel's
-- addresses, or a webhook), written in the transaction of the step that
-- made it and sent by whichever engine claims it first (a lease, so an
-- engine that dies mid-send leaves it to another after lease_until).
-- given_up: failed too often, or cancelled by a recovery (last_error says).
CREATE TABLE alert_deliveries (
  id bigserial PRIMARY KEY,
  alert_id bigint NOT NULL REFERENCES alert_state (id),
  event_id bigint REFERENCES alert_events (id) ON DELETE SET NULL,
  channel text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('email', 'webhook')),
  target text NOT NULL,
  subject text NOT NULL DEFAULT '',
  body text NOT NULL,
  content_type text NOT NULL DEFAULT 'text/plain',
  due_at timestamptz NOT NULL DEFAULT now(),
  attempts integer NOT NULL DEFAULT 0,
  lease_until timestamptz,
  sent_at timestamptz,
  last_error text,
  given_up boolean NOT NULL DEFAULT false
);
-- The sender's claim: the due, unsent rows not given up, oldest due first;
-- sent and given-up rows are not in it.
CREATE INDEX alert_deliveries_due ON alert_deliveries (due_at, id)
  WHERE sent_at IS NULL AND NOT given_up;
CREATE INDEX alert_deliveries_alert ON alert_deliveries (alert_id) WHERE sent_at IS NULL AND NOT given_up;
CREATE INDEX alert_deliveries_sent ON alert_deliveries (sent_at) WHERE sent_at IS NOT NULL;
