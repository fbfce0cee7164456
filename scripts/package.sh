#!/usr/bin/env bash
# Builds the Debian package: the docs site (scripts/docs.sh: its zip goes
# into the package), a release build of ductus and ductusctl, then cpack
# (cmake/DuctusPackage.cmake, packaging/). Prints the .deb's path as its
# last line.
#
#   scripts/package.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build/release"

# The docs first: a broken link fails in seconds, not after the build.
# build/release/ductus-docs-VERSION.zip, installed as ductus-docs.zip.
"$here/scripts/docs.sh" --out "$build/docs" >&2
"$here/scripts/build-ui.sh" >&2  # the console, which the binary embeds
"$here/scripts/build.sh" release ductus ductusctl >&2
rm -f "$build"/package/ductus_*.deb
(cd "$build" && cpack -G DEB --config CPackConfig.cmake) >&2
deb=$(ls "$build"/package/ductus_*.deb)
# Installed binaries use the system's libnode, never the build tree's.
check="$build/package/.check"
for bin in usr/bin/ductus usr/bin/ductusctl; do
  dpkg-deb --fsys-tarfile "$deb" | tar -xO "./$bin" > "$check"
  if readelf -d "$check" | grep -E 'R(UN)?PATH' >&2; then
    echo "package.sh: $bin has an RPATH/RUNPATH" >&2
    exit 1
  fi
done
rm -f "$check"
echo "$deb"
