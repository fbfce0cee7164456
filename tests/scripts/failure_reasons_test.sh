#!/usr/bin/env bash
# scripts/failure-reasons.py on a made-up ctest report: each failed test
# named with the lines that say why (GoogleTest's failure and what follows
# it, a browser check's FAIL, a sanitizer's report), the last lines where
# nothing is recognised, a passing test never, and both limits held.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
reasons="$here/../../scripts/failure-reasons.py"
failures=0
has() {  # has TEXT OUTPUT
  grep -qF -- "$1" <<< "$2" || { echo "FAILED: wanted '$1' in:"; echo "$2"; failures=$((failures + 1)); }
}
lacks() {  # lacks TEXT OUTPUT
  ! grep -qF -- "$1" <<< "$2" || { echo "FAILED: did not want '$1' in:"; echo "$2"; failures=$((failures + 1)); }
}

out="$("$reasons" "$here/failed.xml")"
has "why Gtest.Fails failed:" "$out"
has "  /src/tests/x_test.cpp:42: Failure" "$out"
has "        Which is: 1" "$out"
has "    the message after both values" "$out"
lacks "hidden after the six lines" "$out"
has "    2 errors: holder lost a row" "$out"
lacks "[  FAILED  ]" "$out"
lacks "noise before" "$out"
has "  FAIL an alert fires: timed out waiting for the alert on adt → default" "$out"
has "at until (harness.mjs:40)" "$out"
lacks "ok   the theme" "$out"
has "==1==ERROR: AddressSanitizer: heap-use-after-free" "$out"
has "SUMMARY: AddressSanitizer: heap-use-after-free /src/x.cpp:7 in f" "$out"
has "why Silent.Fails failed:" "$out"
has "  the last line" "$out"
lacks "Runs.AndPasses" "$out"
lacks "a passing test's output" "$out"

out="$("$reasons" "$here/failed.xml" --tests 2 --lines 2)"
has "why Browser.Fails failed:" "$out"
lacks "why Asan.Fails failed:" "$out"
has "(and 2 more failed tests: their output is above)" "$out"
lacks "Which is: 1" "$out"

"$reasons" "$here/no-such-report.xml" > /dev/null 2>&1
[ $? -eq 2 ] || { echo "FAILED: an unreadable report does not exit 2"; failures=$((failures + 1)); }

[ $failures -eq 0 ] && echo "failure-reasons: all checks passed"
exit $((failures > 0))
