#!/usr/bin/env bash
# Builds Ductus. Flavours: release (build/release, GCC) and debug
# (build/debug, AddressSanitizer + UBSan, clang). The web console (ui/) is
# built first when the whole project is (scripts/build-ui.sh).
#
# Why clang for debug: the sanitized build is CI's longest step, and clang
# compiles it faster (the same batch of files: 17.8 s of CPU against
# GCC's 28.3 s, 12.3 s against 16.6 s; all of it fresh: 537 s on 2
# cores); and a second compiler refuses what the first lets through
# (clang 14 refused a structured binding captured by a lambda and a
# vector of capnp::word, both accepted by GCC 12). The package and the
# benches are GCC's.
#
#   scripts/build.sh [release|debug|all] [TARGET...]    default: release, everything
#
# DUCTUS_UNITY_BUILD=ON (CI's fresh builds): each target's sources compile in
# batches (cmake/UnityBuild.cmake), after scripts/unity-alone.py has said
# which files must compile alone. OFF: one file at a time (the default,
# quickest for a rebuild after an edit). Unset: the build folder's choice.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${DUCTUS_BUILD_JOBS:-$(nproc)}"

build() {
  local flavour="$1" type compilers=()
  case "$flavour" in
    release) type=Release ;;
    debug)
      type=Debug
      command -v clang++ >/dev/null ||
        { echo "build.sh: the debug flavour is built with clang++, not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
      compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
      ;;
    *) echo "build.sh: unknown flavour '$flavour' (release, debug, all)" >&2; exit 2 ;;
  esac
  # A build folder made with the other compiler (build/debug before clang)
  # starts again: CMake can't switch one in place.
  local cache="$here/build/$flavour/CMakeCache.txt"
  if [ ${#compilers[@]} -gt 0 ] && [ -f "$cache" ] && ! grep -q '^CMAKE_CXX_COMPILER:FILEPATH=.*clang' "$cache"; then
    echo "build.sh: build/$flavour was configured with another compiler; configuring it again with clang" >&2
    rm -rf "$here/build/$flavour/CMakeCache.txt" "$here/build/$flavour/CMakeFiles"
  fi
  local unity=()
  [ -n "${DUCTUS_UNITY_BUILD:-}" ] && unity=(-DDUCTUS_UNITY_BUILD="$DUCTUS_UNITY_BUILD")
  cmake -S "$here" -B "$here/build/$flavour" -DCMAKE_BUILD_TYPE="$type" "${compilers[@]}" "${unity[@]}" >/dev/null
  if [ "${DUCTUS_UNITY_BUILD:-}" = ON ]; then
    "$here/scripts/unity-alone.py" "$here/build/$flavour"
  fi
  local targets=()
  for t in "${@:2}"; do targets+=(--target "$t"); done
  if cmake --build "$here/build/$flavour" -j "$jobs" "${targets[@]}"; then return; fi
  [ "${DUCTUS_UNITY_BUILD:-}" = ON ] || exit 1
  # scripts/unity-alone.py reads names with a parser, not a compiler, and
  # can miss a clash (a using-directive, a macro). Rather than fail CI's
  # whole run for it, build again one file at a time, and say so: the
  # errors above name the files to add to cmake/unity-alone.txt.
  echo "build.sh: the unity build of $flavour failed (above); building it again one file at a time." \
       "Add the files the errors name to cmake/unity-alone.txt." >&2
  cmake -S "$here" -B "$here/build/$flavour" -DDUCTUS_UNITY_BUILD=OFF >/dev/null
  cmake --build "$here/build/$flavour" -j "$jobs" "${targets[@]}"
}

flavour="${1:-release}"
[ $# -gt 0 ] && shift
# The console first, so this build embeds it (scripts/build-ui.sh); a
# build of named targets takes ui/dist as it is, and so does one whose
# caller built the console already (DUCTUS_UI_BUILT=1: scripts/test, whose
# two builds run side by side and must not both run npm in ui/).
if [ $# -eq 0 ] && [ "${DUCTUS_UI_BUILT:-}" != 1 ]; then "$here/scripts/build-ui.sh"; fi
case "$flavour" in
  all) build release "$@"; build debug "$@" ;;
  *) build "$flavour" "$@" ;;
esac
