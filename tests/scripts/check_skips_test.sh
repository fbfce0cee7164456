#!/usr/bin/env bash
# scripts/check-skips.sh on a made-up ctest report: an allowed skip passes
# where its condition holds and nowhere else, an unlisted skip or a
# disabled test fails, named with why it skipped.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
check="$here/../../scripts/check-skips.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
expect() {  # expect CODE TEXT -- command...: exit code and a line of its output
  local code="$1" text="$2"; shift 3
  local out; out="$("$@" 2>&1)"; local got=$?
  if [ "$got" -ne "$code" ] || ! grep -qF -- "$text" <<< "$out"; then
    echo "FAILED: $* exited $got (wanted $code), output wanted '$text':"; echo "$out"
    failures=$((failures + 1))
  fi
}

cat > "$tmp/all" <<'LIST'
# a comment, then a blank line

Listed.Anywhere  any  machines without the thing
Listed.WithoutUi  no-ui  needs node
Unlisted.Skips  any  (in the next list only)
Unlisted.DISABLED_Off  any  (in the next list only)
LIST
grep -v '^Unlisted' "$tmp/all" > "$tmp/some"

expect 0 "4 skipped, all allowed here" -- env -u DUCTUS_REQUIRE_UI "$check" "$here/skipped.xml" "$tmp/all"
expect 0 'Listed.Anywhere skipped (allowed here: no "thing" on this machine)' \
  -- env -u DUCTUS_REQUIRE_UI "$check" "$here/skipped.xml" "$tmp/all"
expect 1 "Unlisted.Skips skipped and may not skip here: needs a frobnicator" \
  -- env -u DUCTUS_REQUIRE_UI "$check" "$here/skipped.xml" "$tmp/some"
expect 1 "Unlisted.DISABLED_Off skipped and may not skip here: Disabled" \
  -- env -u DUCTUS_REQUIRE_UI "$check" "$here/skipped.xml" "$tmp/some"
expect 1 "2 test(s) skipped" -- env -u DUCTUS_REQUIRE_UI "$check" "$here/skipped.xml" "$tmp/some"
# CI (DUCTUS_REQUIRE_UI=1): a no-ui skip is not allowed there.
expect 1 "Listed.WithoutUi skipped and may not skip here: SKIP_RETURN_CODE=77" \
  -- env DUCTUS_REQUIRE_UI=1 "$check" "$here/skipped.xml" "$tmp/all"
# non-root: allowed only when not root.
sed 's/^Listed.Anywhere  any/Listed.Anywhere  non-root/' "$tmp/all" > "$tmp/nonroot"
if [ "$(id -u)" -eq 0 ]; then
  expect 1 "Listed.Anywhere skipped and may not skip here" \
    -- env -u DUCTUS_REQUIRE_UI "$check" "$here/skipped.xml" "$tmp/nonroot"
else
  expect 0 "Listed.Anywhere skipped (allowed here" \
    -- env -u DUCTUS_REQUIRE_UI "$check" "$here/skipped.xml" "$tmp/nonroot"
fi
# Nothing skipped: passes with any list; no report: refuses.
expect 0 "0 skipped" -- "$check" "$here/none_skipped.xml" "$tmp/some"
expect 2 "cannot read" -- "$check" "$tmp/absent.xml" "$tmp/some"

[ $failures -eq 0 ] && echo "check_skips_test: all passed"
exit $((failures > 0))
