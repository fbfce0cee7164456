#!/usr/bin/env bash
# The docs site (scripts/docs.sh) built into a folder of the test's own:
# mkdocs --strict passes, at least 20 pages, no broken internal link or
# fragment and nothing loaded from another site (scripts/check-links.py),
# and the offline zip holds the site with its search index. Then the link
# checker on a made-up site with a broken link, a missing fragment and a
# remote stylesheet: it must name each with its page (a checker that passes
# everything would prove nothing).
#
#   tests/scripts/docs_site_test.sh SOURCE_DIR
#
# Skips (77) where mkdocs is missing, unless DUCTUS_REQUIRE_UI=1 (CI).
set -euo pipefail
root="${1:?usage: docs_site_test.sh SOURCE_DIR}"

if ! command -v mkdocs >/dev/null 2>&1; then
  if [ "${DUCTUS_REQUIRE_UI:-}" = 1 ]; then
    echo "DUCTUS_REQUIRE_UI=1 and missing: mkdocs (apt-get install mkdocs)" >&2
    exit 1
  fi
  echo "missing: mkdocs (apt-get install mkdocs; scripts/install-deps.sh installs it)"
  exit 77
fi

tmp="$(mktemp -d /tmp/ductus-docs-test.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "docs_site_test: FAILED: $*" >&2; exit 1; }

if ! "$root/scripts/docs.sh" --out "$tmp/site" >"$tmp/out" 2>"$tmp/err"; then
  cat "$tmp/err" >&2
  fail "scripts/docs.sh failed"
fi
grep 'check-links:' "$tmp/err"
pages=$(find "$tmp/site" -name '*.html' | wc -l)
echo "pages: $pages"
[ "$pages" -ge 20 ] || fail "$pages pages, fewer than 20"
for page in index.html guides/install.html operating/stuck-feed.html reference/cli.html \
            reference/configuration.html search/search_index.js; do
  [ -f "$tmp/site/$page" ] || fail "no $page in the site"
done
grep -q 'quarantine' "$tmp/site/search/search_index.js" || fail "the search index has no 'quarantine'"

archive="$(tail -n 1 "$tmp/out")"
[ "$archive" = "$tmp/ductus-docs-$(sed -n 's/^project(ductus VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt").zip" ] ||
  fail "the zip's path, printed last, is '$archive'"
python3 - "$archive" "$pages" <<'PY' || fail "the zip does not hold the site"
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
html = [n for n in names if n.endswith(".html")]
assert all(n.startswith("ductus-docs/") for n in names), names[:5]
assert "ductus-docs/index.html" in names and "ductus-docs/search/search_index.js" in names
assert len(html) == int(sys.argv[2]), (len(html), sys.argv[2])
print(f"zip: {len(names)} files, {len(html)} pages")
PY

# The checker on a site with mistakes.
bad="$tmp/bad"
mkdir -p "$bad/guide"
cat > "$bad/index.html" <<'HTML'
<html><head><link rel="stylesheet" href="https://fonts.example.org/lato.css"></head>
<body><h1 id="top">Home</h1><a href="#top">top</a><a href="guide/page.html#steps">steps</a>
<a href="https://example.org/">elsewhere</a><a href="guide/gone.html">gone</a></body></html>
HTML
cat > "$bad/guide/page.html" <<'HTML'
<html><body><h2 id="step">Steps</h2><a href="../index.html#top">home</a></body></html>
HTML
if python3 "$root/scripts/check-links.py" "$bad" >"$tmp/bad.out" 2>&1; then
  cat "$tmp/bad.out" >&2
  fail "check-links.py passed a site with broken links"
fi
cat "$tmp/bad.out"
grep -qF 'index.html: guide/gone.html: no file guide/gone.html' "$tmp/bad.out" || fail "a missing page not named"
grep -qF 'index.html: guide/page.html#steps: no id "steps" in guide/page.html' "$tmp/bad.out" ||
  fail "a missing fragment not named"
grep -qF 'index.html: https://fonts.example.org/lato.css: loaded from another site' "$tmp/bad.out" ||
  fail "a remote stylesheet not named"
grep -qF 'example.org/:' "$tmp/bad.out" && fail "a link to another site was taken for a broken one"
echo "docs_site_test: ok"
