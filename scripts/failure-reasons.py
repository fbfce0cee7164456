#!/usr/bin/env python3
"""Prints why each failed test failed, in a few lines, from ctest's JUnit
report (ctest --output-junit FILE).

    scripts/failure-reasons.py JUNIT.xml [--lines N] [--tests N]

scripts/test prints this last: CI keeps only the tail of a run, and a
test's output (printed where it failed, hundreds of lines above) is lost
there. Kept from a test's output: GoogleTest's failure lines and up to
six lines after each (up to its next status line), the browser checks'
"FAIL" lines, sanitizer reports' first and SUMMARY lines, ctest's
timeout; at most N lines a test (default 12), for at most N tests
(default 6). Exit 0, or 2 when the report can't be read.
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET

# A line that says why, and how many lines after it belong to it.
REASONS = [
    # GoogleTest's file:line, then the values (two lines each for
    # EXPECT_EQ) and the test's own message last: six lines hold them.
    (re.compile(r"^\S.*:\d+: Failure$"), 6),
    (re.compile(r"^Failure$|^unknown file: Failure"), 6),
    (re.compile(r"^FAIL "), 5),  # ui/tests/checks.mjs: its error's lines are indented
    (re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)"), 1),
    (re.compile(r"runtime error:"), 0),  # UBSan
    (re.compile(r"^SUMMARY: "), 0),
    (re.compile(r"Test timeout computed|\*\*\*Timeout|Timeout after"), 0),
]


def reasons(output: str, limit: int) -> list[str]:
    lines = output.splitlines()
    kept: list[str] = []
    follow = 0
    indented_only = False  # a browser check's error goes on in indented lines
    for line in lines:
        after = next((n for pattern, n in REASONS if pattern.search(line)), None)
        if after is not None:
            kept.append("  " + line[:300])
            follow = after
            indented_only = line.startswith("FAIL ")
        elif follow > 0 and (not indented_only or line.startswith("     ")) \
                and not line.startswith("[  "):  # GoogleTest's next status line
            kept.append("    " + line[:300])
            follow -= 1
        else:
            follow = 0
        if len(kept) >= limit:
            break
    if not kept:  # nothing recognised: the output's last lines
        kept = ["  " + l[:300] for l in lines[-min(limit, 6):]]
    return kept


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("junit")
    ap.add_argument("--lines", type=int, default=12)
    ap.add_argument("--tests", type=int, default=6)
    args = ap.parse_args()
    try:
        root = ET.parse(args.junit).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"failure-reasons: cannot read {args.junit}: {e}", file=sys.stderr)
        return 2
    failed = [t for t in root.iter("testcase") if t.get("status") == "fail"]
    for case in failed[: args.tests]:
        out = "\n".join(e.text or "" for e in case.iter("system-out"))
        print(f"why {case.get('name')} failed:")
        for line in reasons(out, args.lines):
            print(line)
    if len(failed) > args.tests:
        print(f"(and {len(failed) - args.tests} more failed tests: their output is above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
