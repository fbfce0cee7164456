#!/usr/bin/env bash
# Builds the web console (ui/) into ui/dist, which the next build of ductus
# embeds (api/ui/embed_ui.cmake). scripts/build.sh runs it first.
#
#   scripts/build-ui.sh
#
# npm ci when ui/package-lock.json is newer than ui/node_modules; the
# TypeScript check, `vite build` and the size budget (ui/scripts/budget.mjs)
# when a source is newer than ui/dist. Without npm it says so and leaves
# ui/dist as it is (ductus then embeds a page saying how to build the
# console), unless DUCTUS_REQUIRE_UI=1 (CI): then that is an error.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ui="$here/ui"

if ! command -v npm >/dev/null 2>&1; then
  if [ "${DUCTUS_REQUIRE_UI:-}" = 1 ]; then
    echo "build-ui.sh: npm is missing (scripts/install-deps.sh installs it) and DUCTUS_REQUIRE_UI=1" >&2
    exit 1
  fi
  echo "build-ui.sh: no npm here: ductus is built without the web console (scripts/install-deps.sh installs npm)" >&2
  exit 0
fi

cd "$ui"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
  echo "build-ui: npm ci in ui/"
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
  touch node_modules
fi
stamp=dist/index.html
if [ ! -e "$stamp" ] || [ -n "$(find index.html src public package.json package-lock.json \
     vite.config.ts tsconfig.json scripts -newer "$stamp" -print -quit 2>/dev/null)" ]; then
  echo "build-ui: building the console (ui/dist)"
  npm run --silent build
  npm run --silent budget
fi
