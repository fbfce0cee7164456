-- Upgrade: adds each user's console settings (the theme), kept with the user so they follow them to any browser
-- Heavy: none

-- What the web console keeps per user: {"theme": "system" | "light" |
-- "dark"}. The API checks each member; the column only holds an object.
ALTER TABLE users ADD COLUMN settings jsonb NOT NULL DEFAULT '{}'
  CHECK (jsonb_typeof(settings) = 'object');
