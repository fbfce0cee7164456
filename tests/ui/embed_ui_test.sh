#!/usr/bin/env bash
# api/ui/embed_ui.cmake on folders of the test's own: without ui/dist the
# table is one page saying how to build the console (built = false), and
# with DUCTUS_REQUIRE_UI=1 that is an error naming the fix; with files, the
# table is sorted bytewise, source maps stay out, and a file gets a gzip
# copy only where that is at least a tenth smaller.
#
#   embed_ui_test.sh path/to/embed_ui.cmake
set -euo pipefail
script="${1:?usage: embed_ui_test.sh path/to/embed_ui.cmake}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "embed_ui_test: $*" >&2; exit 1; }

# No ui/dist: the page that says how to build the console.
env -u DUCTUS_REQUIRE_UI cmake -DDIST="$tmp/none" -DWORK="$tmp/w1" -DOUT="$tmp/none.cpp" -P "$script"
grep -q 'sizeof kFiles / sizeof kFiles\[0\], false}' "$tmp/none.cpp" || fail "built is not false without ui/dist"
grep -q '"/index.html", "text/html; charset=utf-8"' "$tmp/none.cpp" || fail "no index.html row without ui/dist"
grep -q 'scripts/build-ui.sh' "$tmp/w1/not-built/index.html" || fail "the page does not say how to build the console"

# ... unless the console is required.
if DUCTUS_REQUIRE_UI=1 cmake -DDIST="$tmp/none" -DWORK="$tmp/w2" -DOUT="$tmp/req.cpp" -P "$script" 2>"$tmp/req.err"; then
  fail "DUCTUS_REQUIRE_UI=1 without ui/dist did not fail"
fi
grep -q 'scripts/build-ui.sh' "$tmp/req.err" || fail "the error does not name scripts/build-ui.sh: $(cat "$tmp/req.err")"
[ ! -e "$tmp/req.cpp" ] || fail "a table was written although the console was required"

# A dist: sorted rows, no source map, gzip only where it pays.
mkdir -p "$tmp/dist/assets"
for i in $(seq 200); do echo "console.log('the same line again and again');"; done > "$tmp/dist/assets/b-1.js"
head -c 4000 /dev/urandom > "$tmp/dist/assets/a-2.png"   # does not compress
echo '{}' > "$tmp/dist/assets/b-1.js.map"
echo '<!doctype html><title>t</title>' > "$tmp/dist/index.html"
echo 'Z' > "$tmp/dist/Zeta.txt"  # 'Z' sorts before 'a' bytewise
DUCTUS_REQUIRE_UI=1 cmake -DDIST="$tmp/dist" -DWORK="$tmp/w3" -DOUT="$tmp/dist.cpp" -P "$script"
rows="$(grep -o '^    {"/[^"]*"' "$tmp/dist.cpp" | cut -d'"' -f2)"
expected=$'/Zeta.txt\n/assets/a-2.png\n/assets/b-1.js\n/index.html'
[ "$rows" = "$expected" ] || fail "rows not as expected (sorted, no .map): $rows"
grep -q '"/assets/b-1.js", "text/javascript; charset=utf-8", "\\"[0-9a-f]\{16\}\\"", {ductus_ui_[0-9]*, [0-9]*}, {ductus_ui_[0-9]*_gz, [0-9]*}}' "$tmp/dist.cpp" ||
  fail "the repetitive script has no gzip copy"
grep -q '"/assets/a-2.png", "image/png", "\\"[0-9a-f]\{16\}\\"", {ductus_ui_[0-9]*, 4000}, {}}' "$tmp/dist.cpp" ||
  fail "the random image got a gzip copy, or its row is wrong"
grep -q 'sizeof kFiles / sizeof kFiles\[0\], true}' "$tmp/dist.cpp" || fail "built is not true with a dist"
echo "embed_ui_test: ok"
