-- Upgrade: adds each interface's applied retention tier, so a shorter retention in the project waits for `ductus retention confirm` instead of applying silently
-- Heavy: none

-- tier: where the interface's new messages go (the tier confirmed last).
-- requested_tier: a shorter tier the project asks for, noticed at a start
-- and not confirmed yet; until it is, messages keep going to `tier` and
-- nothing is dropped sooner than that tier promised.
CREATE TABLE interface_retention (
  interface_id bigint PRIMARY KEY REFERENCES interfaces (id),
  tier smallint NOT NULL CHECK (tier IN (7, 21, 49)),
  requested_tier smallint CHECK (requested_tier IN (7, 21, 49)),
  requested_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);
