#!/usr/bin/env bash
# The console's API types are those of this binary: ui/openapi.json is what
# `ductus api-spec` prints, and ui/src/api/schema.d.ts is what
# openapi-typescript makes of it (ui/scripts/gen-api.mjs --check). After a
# change to the API:
#
#   cd ui && DUCTUS_BIN=../build/release/ductus npm run gen:api
#
#   scripts/check-ui-types.sh BINARY     exit 0 same, 1 differ, 77 can't check
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(realpath "${1:?usage: check-ui-types.sh path/to/ductus}")"
ui="$here/ui"

if [ ! -d "$ui/node_modules/openapi-typescript" ] || ! command -v node >/dev/null 2>&1; then
  why="no node, or ui/node_modules has no openapi-typescript (scripts/build-ui.sh runs npm ci)"
  if [ "${DUCTUS_REQUIRE_UI:-}" = 1 ]; then
    echo "check-ui-types: $why, and DUCTUS_REQUIRE_UI=1" >&2
    exit 1
  fi
  echo "check-ui-types: skipped: $why" >&2
  exit 77
fi
cd "$ui"
if DUCTUS_BIN="$bin" node scripts/gen-api.mjs --check; then
  echo "check-ui-types: ui/openapi.json and ui/src/api/schema.d.ts match $bin"
else
  echo "check-ui-types: regenerate with: cd ui && DUCTUS_BIN=$bin npm run gen:api" >&2
  exit 1
fi
