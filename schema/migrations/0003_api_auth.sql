-- Upgrade: adds the API's users, bearer tokens, browser sessions and the audit log
-- Heavy: none

-- Roles are ordered viewer < operator < admin; permissions stand beside
-- them (payloads: read message contents; audit: read the audit log).
-- password_hash is argon2id's encoded string ($argon2id$v=19$m=...).
CREATE TABLE users (
  id bigserial PRIMARY KEY,
  name text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
  password_hash text NOT NULL,
  role text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
  permissions text[] NOT NULL DEFAULT '{}' CHECK (permissions <@ ARRAY['payloads', 'audit']),
  must_change_password boolean NOT NULL DEFAULT false,
  -- Failed sign-ins since the last success or lockout; at 5 the user is
  -- locked until locked_until and the count starts again.
  failed_attempts integer NOT NULL DEFAULT 0,
  locked_until timestamptz,
  disabled boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- A token is shown once; only the SHA-256 (hex) of `dux_<64 hex>` is kept,
-- and every call looks it up, so revoking takes effect on the next call.
-- A token with a user_id acts as that user at most.
CREATE TABLE api_tokens (
  id bigserial PRIMARY KEY,
  name text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
  token_hash text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  role text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
  permissions text[] NOT NULL DEFAULT '{}' CHECK (permissions <@ ARRAY['payloads', 'audit']),
  user_id bigint REFERENCES users (id),
  created_by text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
-- `ductus token revoke NAME` names one token: live names are unique.
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;
CREATE INDEX api_tokens_user ON api_tokens (user_id) WHERE user_id IS NOT NULL;

-- A browser session: the cookie's value is shown to the browser only; its
-- SHA-256 is kept. It ends 12 hours after last_seen_at or at expires_at
-- (7 days after it began), whichever comes first.
CREATE TABLE sessions (
  id bigserial PRIMARY KEY,
  secret_hash text NOT NULL UNIQUE CHECK (secret_hash ~ '^[0-9a-f]{64}$'),
  user_id bigint NOT NULL REFERENCES users (id),
  address text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- One row per thing done: who (actor, actor_kind), how (via: session,
-- token, cli, engine), from where (address), what (action), to what
-- (target_kind, target_id, target_name), how it ended (outcome) and the
-- rest as JSON. Written in the transaction of the change it records, or
-- before an action that has none.
CREATE TABLE audit_log (
  id bigserial PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  actor text NOT NULL,
  actor_kind text NOT NULL CHECK (actor_kind IN ('user', 'token', 'system')),
  via text NOT NULL,
  address text NOT NULL DEFAULT '',
  action text NOT NULL,
  target_kind text NOT NULL DEFAULT '',
  target_id text,
  target_name text NOT NULL DEFAULT '',
  outcome text NOT NULL CHECK (outcome IN ('ok', 'denied', 'failed')),
  detail jsonb NOT NULL DEFAULT '{}'
);
-- GET /audit pages by id (the primary key); these serve its filters, each
-- still in id order so a filtered page stops after its rows.
CREATE INDEX audit_log_actor ON audit_log (actor, id);
CREATE INDEX audit_log_action ON audit_log (action, id);
CREATE INDEX audit_log_at ON audit_log (at);
