#!/usr/bin/env bash
# Builds the docs site (mkdocs.yml: the guides in docs/, then the references
# the binary writes, docs/reference/) and checks it offline.
#
#   scripts/docs.sh [--out DIR] [--no-zip]
#
#   --out DIR   the site's folder (default build/docs, or $DUCTUS_DOCS_OUT);
#               emptied first. The zip is written beside it.
#   --no-zip    build and check only
#
# 1. `mkdocs build --strict` (Debian's mkdocs: apt-get install mkdocs):
#    a warning (a page not found, a bad link between pages) fails.
# 2. scripts/check-links.py: every relative href and src of every page
#    must name a file of the site, every #fragment an id in its page, and
#    nothing may be loaded from another site. Each broken link is printed
#    as PAGE: LINK: why; any fails the script.
# 3. The offline copy: DIR/../ductus-docs-VERSION.zip (VERSION from
#    CMakeLists.txt), one folder ductus-docs/ inside, whose index.html opens
#    from disk with working search. Its bytes depend only on the sources
#    (files in order, times from SOURCE_DATE_EPOCH, else the last commit).
#    Its path is the last line printed.
#
# Exit 0 when the site was built with no broken link; 1 otherwise; 2 when
# called wrong.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -n 's/^# \{0,1\}//p'; }

out="${DUCTUS_DOCS_OUT:-$here/build/docs}"
zip=1
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --out) [ $# -ge 2 ] || { echo "docs.sh: --out needs a folder" >&2; exit 2; }; out="$2"; shift 2 ;;
    --out=*) out="${1#--out=}"; shift ;;
    --no-zip) zip=0; shift ;;
    *) echo "docs.sh: unknown argument '$1' (scripts/docs.sh --help)" >&2; exit 2 ;;
  esac
done

if ! command -v mkdocs >/dev/null 2>&1; then
  echo "docs.sh: mkdocs is missing: apt-get install mkdocs (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
out="$(realpath -m "$out")"
case "$out" in
  "$here"|"$here/docs"|"$here/docs/"*) echo "docs.sh: --out $out would overwrite the sources" >&2; exit 2 ;;
esac
version="$(sed -n 's/^project(ductus VERSION \([0-9][0-9.]*\).*/\1/p' "$here/CMakeLists.txt")"
[ -n "$version" ] || { echo "docs.sh: no project(ductus VERSION ...) in CMakeLists.txt" >&2; exit 1; }

# Reproducible: mkdocs stamps the home page with SOURCE_DATE_EPOCH when set.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH="$(git -C "$here" log -1 --format=%ct 2>/dev/null || date +%s)"
fi
export SOURCE_DATE_EPOCH
# mkdocs imports docs/templates/hooks.py: no __pycache__ in the sources.
export PYTHONDONTWRITEBYTECODE=1

echo "== mkdocs build --strict -> $out" >&2
mkdir -p "$(dirname "$out")"
if ! (cd "$here" && mkdocs build --strict --clean --config-file mkdocs.yml --site-dir "$out") >&2; then
  echo "docs.sh: mkdocs build failed (above)" >&2
  exit 1
fi

echo "== links" >&2
if ! python3 "$here/scripts/check-links.py" "$out" >&2; then
  echo "docs.sh: broken links (above: page, link, why)" >&2
  exit 1
fi

[ "$zip" = 1 ] || exit 0
archive="$(dirname "$out")/ductus-docs-$version.zip"
echo "== $archive" >&2
python3 - "$out" "$archive" <<'PY'
import os, sys, time, zipfile
site, archive = sys.argv[1], sys.argv[2]
stamp = time.gmtime(max(int(os.environ["SOURCE_DATE_EPOCH"]), 315532800))[:6]  # zip starts at 1980
tmp = archive + ".tmp"
with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    for folder, dirs, files in os.walk(site):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            info = zipfile.ZipInfo("ductus-docs/" + os.path.relpath(path, site), stamp)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(path, "rb") as f:
                z.writestr(info, f.read(), compresslevel=9)
os.replace(tmp, archive)
PY
echo "$archive"
