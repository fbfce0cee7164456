-- Upgrade: adds a second factor for local users (time-based codes from an authenticator app): each user's secret, the last step used, their recovery codes, and the roles that must have one
-- Heavy: none

-- totp_secret: base32 of 20 random bytes, set by POST /me/totp and in use
-- once totp_enabled (POST /me/totp/confirm proved the app has it).
-- totp_last_step: the 30-second step of the last code accepted; a code of
-- that step or an earlier one is refused, so an overheard code is not
-- played again. totp_recovery: SHA-256 (hex) of the recovery codes not
-- yet used, each good once in place of a code.
ALTER TABLE users
  ADD COLUMN totp_secret text CHECK (totp_secret ~ '^[A-Z2-7]{32}$'),
  ADD COLUMN totp_enabled boolean NOT NULL DEFAULT false,
  ADD COLUMN totp_last_step bigint,
  ADD COLUMN totp_recovery text[] NOT NULL DEFAULT '{}',
  ADD CONSTRAINT users_totp_enabled_has_secret CHECK (NOT totp_enabled OR totp_secret IS NOT NULL);

-- The roles whose users must sign in with a code (PUT /api/v1/auth/totp).
-- Until such a user has turned theirs on, their session may only do that.
CREATE TABLE totp_required_roles (
  role text PRIMARY KEY CHECK (role IN ('viewer', 'operator', 'admin'))
);
