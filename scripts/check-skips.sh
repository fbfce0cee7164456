#!/usr/bin/env bash
# Fails when a test skipped that may not skip on this machine: a skipped
# test proved nothing, and CI must not pass on one. Reads ctest's JUnit
# report (ctest --output-junit FILE) and the list of allowed skips.
#
#   scripts/check-skips.sh JUNIT.xml [ALLOWED]   (ALLOWED: tests/allowed-skips.txt)
#
# Exit 0: nothing skipped, or only what ALLOWED allows here; 1: a skip not
# allowed (each named, with why it skipped); 2: usage or an unreadable file.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
junit="${1:?usage: check-skips.sh JUNIT.xml [ALLOWED]}"
allowed="${2:-$here/tests/allowed-skips.txt}"
[ -r "$junit" ] || { echo "check-skips: cannot read $junit" >&2; exit 2; }
[ -r "$allowed" ] || { echo "check-skips: cannot read $allowed" >&2; exit 2; }

# Does this machine meet an allowed skip's condition?
holds() {
  case "$1" in
    any) return 0 ;;
    non-root) [ "$(id -u)" -ne 0 ] ;;
    no-ui) [ "${DUCTUS_REQUIRE_UI:-}" != 1 ] ;;
    *) echo "check-skips: $allowed: unknown condition '$1' for $2" >&2; return 1 ;;
  esac
}

# name<TAB>why of every test that did not run: ctest's status "notrun"
# (skipped) or "disabled"; why is gtest's skip message, or ctest's.
skipped="$(awk '
  function unxml(s) {
    gsub(/&quot;/, "\"", s); gsub(/&apos;/, "'\''", s); gsub(/&lt;/, "<", s);
    gsub(/&gt;/, ">", s); gsub(/&amp;/, "\\&", s); return s
  }
  /<testcase / {
    name = ""; status = ""; why = ""; after = 0
    if (match($0, /name="[^"]*"/)) name = unxml(substr($0, RSTART + 6, RLENGTH - 7))
    if (match($0, /status="[^"]*"/)) status = substr($0, RSTART + 8, RLENGTH - 9)
    next
  }
  name != "" && /<skipped message="/ && why == "" {
    if (match($0, /message="[^"]*"/)) why = unxml(substr($0, RSTART + 9, RLENGTH - 10))
  }
  name != "" && after { if ($0 !~ /^\[/) why = unxml($0); after = 0 }
  name != "" && /: Skipped$/ { after = 1 }
  /<\/testcase>/ {
    if (status == "notrun" || status == "disabled") printf "%s\t%s\n", name, (why == "" ? status : why)
    name = ""
  }
' "$junit")"

refused=0
count=0
while IFS=$'\t' read -r name why; do
  [ -n "$name" ] || continue
  count=$((count + 1))
  ok=0
  while read -r test when reason; do
    [ "$test" = "$name" ] || continue
    if holds "$when" "$test"; then ok=1; fi
    break
  done < <(grep -v '^[[:space:]]*\(#\|$\)' "$allowed")
  if [ $ok -eq 1 ]; then
    echo "check-skips: $name skipped (allowed here: $why)"
  else
    echo "check-skips: $name skipped and may not skip here: $why" >&2
    refused=$((refused + 1))
  fi
done <<< "$skipped"

if [ $refused -gt 0 ]; then
  echo "check-skips: $refused test(s) skipped that $allowed does not allow on this machine" \
       "(make them run here, or list them there with why)" >&2
  exit 1
fi
echo "check-skips: $count skipped, all allowed here"
