#!/usr/bin/env bash
# Builds Ductus. Flavours: release (build/release) and debug (build/debug,
# AddressSanitizer + UBSan).
#
#   scripts/build.sh [release|debug|all]    default: release
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${DUCTUS_BUILD_JOBS:-$(nproc)}"

build() {
  local flavour="$1" type
  case "$flavour" in
    release) type=Release ;;
    debug) type=Debug ;;
    *) echo "build.sh: unknown flavour '$flavour' (release, debug, all)" >&2; exit 2 ;;
  esac
  cmake -S "$here" -B "$here/build/$flavour" -DCMAKE_BUILD_TYPE="$type" >/dev/null
  cmake --build "$here/build/$flavour" -j "$jobs"
}

case "${1:-release}" in
  all) build release; build debug ;;
  *) build "${1:-release}" ;;
esac
