#!/bin/sh
# What the process boundary costs interface code: a realistic ~3 KB ORU^R01
# transform (parse, change three fields, re-encode) run through one confined
# worker with many calls pipelined, side by side with the same ScriptHost
# called in-process without IPC, plus a no-op call's round trip. Prints a
# table; targets: >= 15,000 ORU/s per worker, IPC overhead < 20%. The two
# take turns in ROUNDS rounds and the medians are printed: this machine's
# speed drifts from one second to the next.
#
# usage: scripts/bench-transform.sh [BUILD_DIR] [CALLS] [ROUNDS]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/release}
calls=${2:-300000}
rounds=${3:-7}
if [ ! -x "$build/tests/bench/bench_transform" ] || [ ! -x "$build/ductus" ]; then
  echo "build first: cmake --build $build --target ductus bench_transform" >&2
  exit 2
fi
scratch=$(mktemp -d /tmp/ductus-bench-transform.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
"$build/tests/bench/bench_transform" "$build/ductus" "$scratch" "$calls" "$rounds"
