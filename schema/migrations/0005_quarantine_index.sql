-- Upgrade: adds a partial index of the quarantined deliveries, so the API's quarantine list (newest first, paged by message id) and per-destination quarantine counts read only those rows
-- Heavy: deliveries

-- Quarantined rows are few beside the sent ones; without this, listing them
-- newest first read the whole of deliveries (or walked its primary key
-- through every sent row). message_id first: a page is a backward scan that
-- stops after `limit` messages; destination_id second: an interface's
-- filter is checked in the index, without visiting the rows.
CREATE INDEX deliveries_quarantined ON deliveries (message_id, destination_id) WHERE status = 3;
