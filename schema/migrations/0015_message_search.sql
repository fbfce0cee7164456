-- Upgrade: adds four indexes for the message browser: a search by control id or by key value across interfaces, the edited copies of a message, and the deliveries that failed and wait for a retry; each is built over the whole table while inserts into it wait
-- Heavy: messages, deliveries

-- What each costs, once, at the upgrade: CREATE INDEX on a partitioned
-- table can't be CONCURRENTLY, so each one reads every partition of its
-- table and holds a SHARE lock on it (and on each partition in turn) while
-- it builds: no message is stored, and no delivery's outcome written, until
-- the four are built. On a big store that is minutes (a few seconds per
-- million rows of the table read, on a small machine); upgrade in a quiet
-- hour, or build each index beforehand by hand, partition by partition
-- (CREATE INDEX CONCURRENTLY on each leaf, then CREATE INDEX ON ONLY the
-- parent and ALTER INDEX ... ATTACH PARTITION each, as PostgreSQL's manual
-- describes), under these names; IF NOT EXISTS then skips them here.
-- The partitions made later (the coming days', the held area's months)
-- get each index from the parent at no cost.
--
-- And at each insert: the two searches' indexes take one entry per message
-- that has the value (JSON messages have no control id); messages_origin
-- only routed and edited copies; deliveries_retrying only a delivery that
-- failed and is still pending (retry updates of such a row now touch an
-- index, which they did not before; sent and quarantined rows already did).

-- GET /api/v1/messages?control_id=... | ?key=...: the message found in
-- any interface, newest (or oldest) first, a page a backward (forward)
-- scan that stops after `limit` rows. The indexes of 0006 lead with
-- interface_id, so without these a search over every interface read all
-- of them. Partial: messages without the value add nothing.
CREATE INDEX IF NOT EXISTS messages_control_id_search ON messages (control_id, id)
  WHERE control_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_key_value_search ON messages (key_value, id)
  WHERE key_value IS NOT NULL;

-- A message's edited copies (POST /messages/{id}/edit stores the copy with
-- origin_id = the original, in the same interface), so a row of the
-- browser can say "edited to N" without walking the interface's newer
-- messages. Routed copies carry origin_id too (a message of another
-- interface); partial, so the rest add nothing.
CREATE INDEX IF NOT EXISTS messages_origin ON messages (origin_id)
  WHERE origin_id IS NOT NULL;

-- Deliveries that failed and wait for their next try (pending, attempts
-- > 0): with deliveries_quarantined (0005), what the browser's
-- status=errors reads, instead of every pending delivery of a backlog.
CREATE INDEX IF NOT EXISTS deliveries_retrying ON deliveries (message_id, destination_id)
  WHERE status = 0 AND attempts > 0;
