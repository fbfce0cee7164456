-- Upgrade: adds the columns the API's message browser searches by (message type, control id, the ordering key's value) and the charset a message was read in, with three indexes on messages; rows stored before it keep NULL there
-- Heavy: messages

-- Read at intake (intake/message_keys.h), NULL when the message has none:
-- message_type: HL7 MSH-9 with '^' between its components ("ADT^A01^ADT_A01"),
-- whatever delimiters the sender declared; control_id: MSH-10; key_value:
-- the ordering key's value, the same text its lane is computed from (HL7 or
-- JSON path). charset: 'iso-8859-1' when the interface's `charset:` or MSH-18
-- said the bytes are ISO-8859-1; NULL: UTF-8 where the bytes are UTF-8,
-- ISO-8859-1 where they are not (the SDK's rule), so the API gives a payload
-- back as the text the interface's code read. Values go through
-- store::searchableText (UTF-8, no NUL, longer than 512 bytes as a SHA-256).
-- Nullable without a default: adding them rewrites nothing.
ALTER TABLE messages ADD COLUMN message_type text;
ALTER TABLE messages ADD COLUMN control_id text;
ALTER TABLE messages ADD COLUMN key_value text;
ALTER TABLE messages ADD COLUMN charset text;

-- Only what the browser's three lookups need, since every index costs each
-- insert: an interface's messages newest first, paged by id (a backward
-- scan that stops after a page; status, time and type filter the rows it
-- walks); by control id (nearly unique: a sort of the few found is free);
-- by key value, with id last, since a patient's key matches thousands of
-- messages and a page of them should still stop early. The last two are
-- partial: messages without the value (JSON has no control id) add nothing
-- to them.
CREATE INDEX messages_browse ON messages (interface_id, id);
CREATE INDEX messages_control_id ON messages (interface_id, control_id)
  WHERE control_id IS NOT NULL;
CREATE INDEX messages_key_value ON messages (interface_id, key_value, id)
  WHERE key_value IS NOT NULL;
