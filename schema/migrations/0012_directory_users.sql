-- Upgrade: adds users who sign in with a directory's password (LDAP, Active Directory) or through an OpenID Connect provider: where each user's password lives, who they are there, and when the directory last said they left
-- Heavy: none

-- source: 'local' (the password's argon2id hash is here), 'ldap' (the
-- directory checks the password) or 'oidc' (a provider signs them in);
-- the last two keep password_hash '' (still NOT NULL, so a binary from
-- before this migration reads a row it can't sign anyone in with: no
-- argon2id hash is empty). Such a row is made at the user's
-- first sign-in and its role follows their groups.
-- external_id: their entry's DN, as the directory last named it; or the
-- provider's subject (sub), which a later sign-in of the name must match,
-- so a name the provider gives to someone else later is not their account.
-- directory_left_at: set by the refresh round when they are no longer in
-- the directory or in no mapped group; their sessions and tokens stop
-- working while it is set, and a sign-in the directory allows again
-- clears it.
ALTER TABLE users
  ADD COLUMN source text NOT NULL DEFAULT 'local' CHECK (source IN ('local', 'ldap', 'oidc')),
  ADD COLUMN external_id text,
  ADD COLUMN directory_checked_at timestamptz,
  ADD COLUMN directory_left_at timestamptz,
  ADD CONSTRAINT users_only_local_has_password CHECK (source = 'local' OR password_hash = '');
