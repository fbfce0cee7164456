#!/bin/sh
# What the process boundary costs interface code: a realistic ~3 KB ORU^R01
# transform (parse, change three fields, re-encode) run by the same
# ScriptHost in-process (one thread, no IPC) and through one confined worker,
# plus a no-op call's round trip. Two comparisons, printed apart:
#   one call at a time: one in-process thread vs one worker, each call sent
#     when the previous one answered: the same work in series either way, so
#     the ratio is what IPC adds (a pipelined worker beside one thread would
#     compare two cores with one);
#   pipelined: up to 512 calls waiting, as a delivery loop uses a worker:
#     the throughput one worker gives the engine.
# CPU per transform is counted on both sides of the pipe, the worker's
# process and the supervisor's (this process), so the IPC overhead and the
# per-core figures include what the supervisor spends on every call, not
# only the worker. Targets: >= 15,000 ORU/s per worker, IPC overhead < 20%.
# The three take turns in ROUNDS rounds and the medians are printed: this
# machine's speed drifts from one second to the next.
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
