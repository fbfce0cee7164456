-- Upgrade: adds users who sign in with a directory's password (LDAP, Active Directory): where each user's password lives, their entry, and when the directory last said they left
-- Heavy: none

-- source: 'local' (the password's argon2id hash is here) or 'ldap' (the
-- directory checks the password; no hash is kept). A directory user's row
-- is made at their first sign-in and its role follows their groups.
-- directory_dn: their entry, as the directory last named it.
-- directory_left_at: set by the refresh round when they are no longer in
-- the directory or in no mapped group; their sessions and tokens stop
-- working while it is set, and a sign-in the directory allows again
-- clears it.
ALTER TABLE users
  ADD COLUMN source text NOT NULL DEFAULT 'local' CHECK (source IN ('local', 'ldap')),
  ADD COLUMN directory_dn text,
  ADD COLUMN directory_checked_at timestamptz,
  ADD COLUMN directory_left_at timestamptz,
  ALTER COLUMN password_hash DROP NOT NULL,
  ADD CONSTRAINT users_local_has_password CHECK (source <> 'local' OR password_hash IS NOT NULL),
  ADD CONSTRAINT users_directory_has_no_password CHECK (source = 'local' OR password_hash IS NULL);
