#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (build/fuzz: the
# libraries they need compiled with -fsanitize=fuzzer-no-link,address,
# undefined) and runs each for SECONDS on a copy of its seed corpus, after
# replaying its regression inputs (tests/fuzz/regressions/<target>/).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 60 s each, every target
#   scripts/fuzz.sh --build-only [TARGET...]   build, run nothing
#
# Targets: mllp hl7 http frame config cron. The repository is not written:
# the corpus grows in a temporary folder, removed at the end. A crash leaves
# its input in build/fuzz/crashes/<target>/ (emptied when that target runs
# again) and the run's log in build/fuzz/logs/<target>.log. Prints a table
# (executions, exec/s, coverage, result) and exits 1 on any crash.
# Needs clang and libclang-rt-14-dev (scripts/install-deps.sh installs them).
#
# DUCTUS_FUZZ_OPTIMIZE=0: the libraries and targets at -O0 -g1 instead of
# -O2 -g (CMake's Debug instead of RelWithDebInfo, asserts on). About half
# the CPU to build (a batch of common/: 9-11 s against 22-24 s), for fewer
# executions a second: what CI wants for its 10-second runs, whose build
# is on its critical path. Long runs keep the default.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build/fuzz"
fuzz_src="$here/tests/fuzz"
jobs="${DUCTUS_BUILD_JOBS:-$(nproc)}"
all_targets=(mllp hl7 http frame config cron)

# --build-only: .ci/run builds the targets at a low priority beside the
# tests, which leave most of the two cores idle, and runs them afterwards.
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; set -- 60 "$@"; fi
seconds="${1:-60}"
[ $# -gt 0 ] && shift
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz.sh: SECONDS must be a whole number >= 1, got '$seconds'" >&2
  exit 2
fi
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (${all_targets[*]})" >&2; exit 2; }
done

# The longest input per target: messages, HTTP requests and frames of a few
# tens of KB reach every path (the MLLP and HTTP targets lower their size
# limits to 8 KB and 4 KB of head for that); project files and cron
# expressions are short.
max_len() {
  case "$1" in
    mllp | hl7 | http | frame) echo 65536 ;;
    config) echo 16384 ;;
    cron) echo 256 ;;
  esac
}

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }
done

# ---- configure and build ----
# As the project's own sanitizer flavour (CMakeLists.txt, DUCTUS_SANITIZE):
# UB stops the run, and no vptr checks (they need the typeinfo of V8's
# classes, which libnode, built without RTTI, does not have: ductus and the
# tests would not link).
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-sanitize=vptr -fno-omit-frame-pointer"
build_type=RelWithDebInfo
[ "${DUCTUS_FUZZ_OPTIMIZE:-1}" = 0 ] && build_type=Debug
generator=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$here" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE="$build_type" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DDUCTUS_FUZZ=ON -DDUCTUS_UNITY_BUILD="${DUCTUS_UNITY_BUILD:-OFF}" >/dev/null
# DUCTUS_UNITY_BUILD=ON (CI): the libraries compile in batches, as the two
# flavours do (scripts/build.sh): 225 s for the six targets on 2 cores,
# against 327 s one file at a time.
if [ "${DUCTUS_UNITY_BUILD:-}" = ON ]; then "$here/scripts/unity-alone.py" "$build"; fi
build_targets=()
for t in "${targets[@]}"; do build_targets+=(--target "fuzz_$t"); done
start=$(date +%s)
if ! flock /tmp/ductus-build.lock cmake --build "$build" -j "$jobs" "${build_targets[@]}"; then
  [ "${DUCTUS_UNITY_BUILD:-}" = ON ] || exit 1
  # As scripts/build.sh does: a clash scripts/unity-alone.py missed costs a
  # build one file at a time, not the run.
  echo "fuzz.sh: the unity build failed (above); building again one file at a time." \
       "Add the files the errors name to cmake/unity-alone.txt." >&2
  cmake -S "$here" -B "$build" -DDUCTUS_UNITY_BUILD=OFF >/dev/null
  flock /tmp/ductus-build.lock cmake --build "$build" -j "$jobs" "${build_targets[@]}"
fi
echo "fuzz.sh: built ${targets[*]} in $(( $(date +%s) - start )) s"
[ "$build_only" = 1 ] && exit 0

# ---- run ----
work="$(mktemp -d "${TMPDIR:-/tmp}/ductus-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/logs"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

rows=()
failed=0
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/fuzz_$t"
  crashes="$build/crashes/$t"
  log="$build/logs/$t.log"
  rm -rf "$crashes"
  mkdir -p "$crashes" "$work/$t/corpus" "$work/$t/tmp"
  cp -r "$fuzz_src/corpus/$t/." "$work/$t/corpus/" 2>/dev/null || true
  : >"$log"

  # Regressions first: each input once; one that still crashes is a bug
  # that came back (or is not fixed yet).
  regressions=()
  if [ -d "$fuzz_src/regressions/$t" ]; then
    while IFS= read -r -d '' f; do regressions+=("$f"); done \
      < <(find "$fuzz_src/regressions/$t" -type f ! -name '*.md' -print0 | sort -z)
  fi
  replay_failed=""
  for f in "${regressions[@]}"; do
    echo "== regression $f" >>"$log"
    if ! (cd "$work/$t" && TMPDIR="$work/$t/tmp" "$bin" -runs=1 "$f") >>"$log" 2>&1; then
      cp "$f" "$crashes/"
      replay_failed="${replay_failed:+$replay_failed }$(basename "$f")"
    fi
  done

  echo "fuzz.sh: fuzzing $t for ${seconds} s (log: ${log#$here/})"
  dict=()
  [ -f "$fuzz_src/dict/$t.dict" ] && dict=(-dict="$fuzz_src/dict/$t.dict")
  echo "== fuzzing" >>"$log"
  rc=0
  (cd "$work/$t" && TMPDIR="$work/$t/tmp" "$bin" "$work/$t/corpus" "${dict[@]}" \
    -max_total_time="$seconds" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$crashes/") >>"$log" 2>&1 || rc=$?

  # The numbers of this run (after "== fuzzing"): libFuzzer's final stats
  # (also printed on a crash), and the coverage of its last status line.
  run_log="$(sed -n '/^== fuzzing$/,$p' "$log")"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' <<<"$run_log" | tail -1)"
  speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' <<<"$run_log" | tail -1)"
  cov="$( (grep -o 'cov: [0-9]*' <<<"$run_log" || true) | tail -1 | cut -d' ' -f2)"
  artifact="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' <<<"$run_log" | tail -1)"
  result=ok
  if [ "$rc" -ne 0 ]; then
    failed=1
    result="crash: ${artifact:-see the log} (exit $rc)"
  fi
  if [ -n "$replay_failed" ]; then
    failed=1
    result="regressions fail: $replay_failed (fuzzing: $result)"
  fi
  rows+=("$(printf '%-8s %12s %8s %8s  %s' "$t" "${execs:--}" "${speed:--}" "${cov:--}" "${result//$here\//}")")
done

echo
printf '%-8s %12s %8s %8s  %s\n' target executions exec/s cov result
for r in "${rows[@]}"; do echo "$r"; done
exit "$failed"
