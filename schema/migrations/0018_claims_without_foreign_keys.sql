-- Upgrade: interface_owners loses its two foreign keys, so claiming 1,001 interfaces at start costs one insert of 1,001 rows rather than 2,002 checks as well
-- Heavy: none

-- A foreign key is checked row by row: claiming 1,001 interfaces ran
-- 2,002 lookups (the interface, the engine) and took 25 ms of a 33 ms
-- insert on an idle machine, 60 ms while the workers load code beside it,
-- on every start's way to listening. What they guarded holds without them:
-- * engine_id: a claim is inserted in the transaction that upserts its
--   engine's row, under the claim lock (schema/ownership.cpp), and the
--   only statement that deletes engines runs under the same lock and
--   deletes none that still has claims;
-- * interface_id: the ids come from the interfaces table (registered in
--   the same start), and interfaces are never deleted.
-- Every reader joins interfaces and engines, so a row that broke either
-- rule would show nowhere; it would go with its engine's release.
ALTER TABLE interface_owners DROP CONSTRAINT interface_owners_engine_id_fkey;
ALTER TABLE interface_owners DROP CONSTRAINT interface_owners_interface_id_fkey;
