#!/usr/bin/env bash
# Installs everything Ductus needs to build, test and run on Debian 12, as
# root. Idempotent: a second run checks and does nothing visible.
#
#   scripts/install-deps.sh           (as root)
#
# What it installs: the Debian packages the build and tests need, a
# PostgreSQL 15 server for dev and tests, and V8 (docs/architecture.md):
# libnode108 + libnode-dev (Node 18's V8 10.2) extracted with dpkg-deb into
# .deps/libnode in this checkout, because Debian's Node.js 20 package
# conflicts with an installed libnode-dev.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
v8_root="$here/.deps/libnode"

packages=(
  build-essential cmake pkg-config git
  lld  # the linker (CMakeLists.txt): Debug test binaries link in seconds, not minutes
  libuv1-dev libpq-dev libssl-dev nlohmann-json3-dev libyaml-cpp-dev
  libcapnp-dev capnproto libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev googletest libcli11-dev
  libseccomp-dev libsystemd-dev libcurl4-openssl-dev node-llhttp
  libargon2-dev libssh2-1-dev libldap-dev
  clang libclang-rt-14-dev  # the Debug build (scripts/build.sh); scripts/fuzz.sh: libFuzzer
  postgresql-15 postgresql-client-15
  nodejs  # tests/api: the OpenAPI document's validator (npm, below)
  prometheus  # tests/api: promtool checks GET /api/v1/metrics
  chromium  # tests/ui: the web console in a real browser (playwright-core)
  zbar-tools  # tests/ui: zbarimg reads the console's QR code for the second factor
  testssl.sh  # tests/e2e: what a TLS listener offers, judged by a tool we did not write
  python3-aiosmtpd  # tests: alert e-mail against a real SMTP server (for /usr/bin/python3)
  openssh-server openssh-client  # tests: SFTP against a real sshd; scripts/bench-sftp.sh's sftp -b
  slapd ldap-utils  # tests: directory sign-in against a real OpenLDAP server (no system one is set up)
  unixodbc-dev tdsodbc  # db() on SQL Server: unixODBC and FreeTDS's driver
  strace  # tests: the file sender's system calls in the order the kernel saw them
  lintian  # scripts/test-package.sh: the .deb as Debian judges packages
  universal-ctags  # scripts/unity-alone.py: which files a unity build compiles alone
  mkdocs  # scripts/docs.sh: the docs site and its search (Debian's: upgraded with the system)
  # libnode108's runtime libraries (it is extracted, not installed)
  libicu72 libc-ares2 libnghttp2-14 libbrotli1 zlib1g
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (it uses apt-get)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -e "$v8_root/usr/lib/x86_64-linux-gnu/libnode.so.108" ] || [ ! -e "$v8_root/usr/include/node/v8.h" ]; then
  echo "install-deps: extracting V8 (libnode108, libnode-dev) into $v8_root"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  chmod 755 "$tmp"  # apt downloads as the _apt user
  ( cd "$tmp" && apt-get download -qq libnode108 libnode-dev 2>&1 | grep -v '^W: Download is performed unsandboxed' || true )
  ls "$tmp"/libnode108_*.deb "$tmp"/libnode-dev_*.deb >/dev/null
  rm -rf "$v8_root"
  mkdir -p "$v8_root"
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$v8_root"; done
fi

# Debian's nodejs comes without npm; a Node.js from elsewhere (NodeSource)
# brings its own, and Debian's npm would conflict with it.
if ! command -v npm >/dev/null 2>&1; then
  echo "install-deps: installing npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
# tests/api/openapi_test.cpp validates the API's document with an npm
# package, tests/ui signs in through a real OpenID Connect provider
# (oidc-provider), and tests/supervisor/cli/reference_test.cpp judges the
# project files' JSON Schemas with Ajv (ajv, yaml), pinned by their
# package-lock.json.
if [ ! -d "$here/tests/api/node/node_modules/@seriousme/openapi-schema-validator" ] ||
   [ ! -d "$here/tests/api/node/node_modules/oidc-provider" ] ||
   [ ! -d "$here/tests/api/node/node_modules/ajv" ] ||
   [ ! -d "$here/tests/api/node/node_modules/yaml" ] ||
   [ "$here/tests/api/node/package-lock.json" -nt "$here/tests/api/node/node_modules" ]; then
  echo "install-deps: npm ci in tests/api/node"
  ( cd "$here/tests/api/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null )
fi

# The throwaway clusters run as the postgres OS user (initdb refuses root).
id postgres >/dev/null 2>&1 || { echo "install-deps: no postgres user after installing postgresql-15" >&2; exit 1; }
exit 0
