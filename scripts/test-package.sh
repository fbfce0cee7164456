#!/usr/bin/env bash
# Builds the .deb, judges it with lintian (no error and no warning, beyond
# what packaging/lintian-overrides excuses with a reason), installs it on a
# fresh Debian 12, then checks the installed engine from its installed
# paths (`man ductus` too) and purges it.
#
#   scripts/test-package.sh [--host] [DEB]     default DEB: built by scripts/package.sh
#   scripts/test-package.sh --base-only        make the chroot's bookworm, nothing else
#
# By default the fresh Debian 12 is a chroot: a minimal bookworm made once
# with debootstrap (kept in $DUCTUS_PACKAGE_BASE, default
# /var/tmp/ductus-package-base, ~2 minutes the first time), copied for each
# run and removed after it. No container is needed, only root. --host
# installs on this machine instead (the runtime libraries it pulls in stay);
# that fails where Node.js comes from elsewhere than Debian (NodeSource's
# nodejs does not satisfy libnode108's node-* dependencies).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ "$(id -u)" = 0 ] || { echo "test-package.sh: run as root (dpkg, chroot)" >&2; exit 2; }

# The chroot's minimal bookworm, made once and kept.
base="${DUCTUS_PACKAGE_BASE:-/var/tmp/ductus-package-base}"
make_base() {
  [ -x "$base/usr/bin/apt-get" ] && return 0
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
  echo "== debootstrap bookworm into $base (once)"
  rm -rf "$base"
  debootstrap --variant=minbase bookworm "$base" http://deb.debian.org/debian >/dev/null
}
# --base-only: only that (.ci/run makes it beside the builds: on a fresh
# machine it is two minutes of downloads).
if [ "${1:-}" = --base-only ]; then
  make_base
  exit 0
fi

host=0
if [ "${1:-}" = --host ]; then host=1; shift; fi
deb="${1:-}"
if [ -z "$deb" ]; then deb="$("$here/scripts/package.sh" | tail -n 1)"; fi
deb="$(realpath "$deb")"
echo "== $deb"
dpkg-deb -I "$deb" | sed -n '/Package:/,$p'
start=$(date +%s)

# What is checked, run as root on the target (this machine or the chroot),
# with the .deb at $1.
checks=$(cat <<'CHECKS'
set -euo pipefail
fail() { echo "test-package.sh: FAILED: $*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
echo "== installing"
# dpkg -i stops at missing dependencies; apt-get installs them and finishes
# configuring ductus.
if ! dpkg -i "$1"; then apt-get install -f -y -q; fi
[ "$(dpkg-query -W -f='${Status}' ductus)" = "install ok installed" ] || fail "ductus is not installed"

echo "== checking"
[ "$(command -v ductus)" = /usr/bin/ductus ] || fail "ductus is not /usr/bin/ductus"
libnode=$(ldd /usr/bin/ductus | awk '$1 == "libnode.so.108" { print $3 }')
[ -n "$libnode" ] && [ "$(dpkg -S "$(realpath "$libnode")" | cut -d: -f1)" = libnode108 ] ||
  fail "ductus loads libnode.so.108 from '$libnode', not from the libnode108 package"
if ldd /usr/bin/ductus /usr/bin/ductusctl | grep 'not found'; then fail "a library is missing"; fi
ductus version
ductusctl version
# The man pages, as a user reads them (man-db and groff are not in a
# minimal Debian: installed here for the check).
for page in ductus ductusctl ductus-run ductusctl-status; do
  [ -f "/usr/share/man/man1/$page.1.gz" ] || fail "no man page $page(1)"
done
if ! command -v man >/dev/null; then apt-get install -y -q --no-install-recommends man-db >/dev/null; fi
MANWIDTH=80 man ductus 2>/dev/null | grep -q 'ductus - Ductus, a healthcare integration engine' ||
  fail "man ductus does not show the page"
MANWIDTH=80 man ductusctl-status >/dev/null 2>&1 || fail "man ductusctl-status fails"
[ -f /usr/share/doc/ductus/copyright ] || fail "no copyright file"
[ -f /usr/share/doc/ductus/changelog.Debian.gz ] || fail "no changelog.Debian.gz"
[ -f /usr/share/ductus/schemas/interface.schema.json ] || fail "no interface.schema.json"
# The docs site to read offline (scripts/docs.sh): a zip, not an empty file.
[ "$(head -c 2 /usr/share/doc/ductus/ductus-docs.zip 2>/dev/null)" = PK ] ||
  fail "no docs site zip at /usr/share/doc/ductus/ductus-docs.zip"
getent passwd ductus >/dev/null || fail "no ductus user"
[ "$(stat -c '%U:%G %a' /var/lib/ductus)" = "ductus:ductus 750" ] ||
  fail "/var/lib/ductus is $(stat -c '%U:%G %a' /var/lib/ductus)"
[ "$(stat -c '%U:%G %a' /etc/ductus)" = "root:ductus 750" ] ||
  fail "/etc/ductus is $(stat -c '%U:%G %a' /etc/ductus)"
[ -f /lib/systemd/system/ductus.service ] || fail "no unit"
# validate loads the code in the confined worker, as the engine will: as
# root from the installed examples, then as the service's user.
ductus validate /usr/share/doc/ductus/examples/adt-feed
project=$(mktemp -d /tmp/ductus-package.XXXXXX)
cp -r /usr/share/doc/ductus/examples/adt-feed/. "$project"
chown -R ductus:ductus "$project"
runuser -u ductus -- /usr/bin/ductus validate "$project"
rm -rf "$project"

echo "== purging"
dpkg -P ductus
for f in /usr/bin/ductus /usr/bin/ductusctl /lib/systemd/system/ductus.service /etc/ductus/ductus.env; do
  [ ! -e "$f" ] || fail "$f is still there after the purge"
done
CHECKS
)

# The installed binaries: no RUNPATH into a build tree (readelf is not in
# a minimal Debian, so it runs here, on the package's files).
unpacked=$(mktemp -d)
dpkg-deb -x "$deb" "$unpacked"
if readelf -d "$unpacked/usr/bin/ductus" "$unpacked/usr/bin/ductusctl" | grep -E 'R(UN)?PATH'; then
  echo "test-package.sh: FAILED: an installed binary has an RPATH/RUNPATH" >&2
  exit 1
fi
rm -rf "$unpacked"

# lintian, as Debian judges a package: any error or warning fails (an
# accepted one is overridden with its reason in packaging/lintian-overrides,
# which the package installs where lintian reads it).
command -v lintian >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q lintian >/dev/null
echo "== lintian"
report=$(lintian --fail-on none --tag-display-limit 0 "$deb" 2>&1 || true)
[ -z "$report" ] || echo "$report"
if echo "$report" | grep -qE '^[EW]: '; then
  echo "test-package.sh: FAILED: lintian reports errors or warnings (above)" >&2
  exit 1
fi
command -v systemd-analyze >/dev/null && systemd-analyze verify "$here/packaging/ductus.service" 2>&1 |
  grep -v 'is not executable' || true

if [ "$host" = 1 ]; then
  bash -c "$checks" test-package "$deb"
else
  make_base
  root=$(mktemp -d /var/tmp/ductus-package-root.XXXXXX)
  cleanup() {
    umount "$root/proc" 2>/dev/null || true
    rm -rf "$root"
  }
  trap cleanup EXIT
  cp -a "$base/." "$root/"
  mount -t proc proc "$root/proc"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  cp "$deb" "$root/tmp/"
  echo "== apt-get update in the chroot"
  chroot "$root" apt-get update -q >/dev/null
  chroot "$root" /bin/bash -c "$checks" test-package "/tmp/$(basename "$deb")"
fi
echo "== package OK ($(( $(date +%s) - start )) s)"
