-- Upgrade: drops messages_control_id (interface, control id), which every message with a control id paid an entry for at intake and again at its settle, while the search by control id within an interface already used migration 0015's (control id, id)
-- Heavy: none

-- Catalog changes only (no index is built, no table read), but the drop
-- takes the table's strongest lock for a moment: rather than queue every
-- insert behind a long report, give up (the start fails, saying so, and
-- is tried again).
SET LOCAL lock_timeout = '10s';

-- What it cost: an entry in every insert of a message with a control id
-- (every HL7 message has one), and another at every settle, since the
-- message's status update is not HOT and each index takes an entry for
-- the new version. What it gave: nothing a plan used since 0015. A
-- control id is nearly unique, so the planner reads (control_id, id)
-- for the search within an interface as for the one across interfaces,
-- newest first, keeping the interface's (message_browser_test checks the
-- plan); a sender that repeats its control ids is read in id order there,
-- a page at a time, where the dropped index had no id to stop by.
-- The key value keeps both of its indexes: a patient's key matches
-- thousands of messages across interfaces, and a page of one interface's
-- would then read them all.
-- A binary from before this migration runs the same statements (they name
-- no index).
DROP INDEX IF EXISTS messages_control_id;
