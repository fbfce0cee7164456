#!/usr/bin/env bash
# Start-up at scale (issue #33: 1,001 interfaces ready in under 0.5 s, idle
# under 0.3 % of a core).
#
# Two projects, each run on a fresh database per round, in turns (the order
# swapped every other round: this machine's speed drifts):
#   one:  1 MLLP interface;
#   many: INTERFACES MLLP interfaces (a port each),
# each with a file destination, a pass-through transform and 2 workers.
# Measured per run: from exec to the "started" line as seen from outside
# (the engine's own figure beside it), the engine's resident memory once
# started, and its CPU share of one core with no traffic: over the SETTLE
# seconds right after the started line (the first rounds of the monitor,
# the alerts and the delivery loops' first reads run then: start-up's
# tail), and over the IDLE seconds after those (idle: what the issue's
# limit is about).
# The engine's debug log says how long each start-up step took ("start-up:
# ..." lines); the last round's are printed under the table.
#
# A first start on a new database also migrates it and creates its
# partitions: the "first" columns. The figure the issue names is the
# engine's start on a database it has run on before ("again"): a restart.
#
#   scripts/bench-startup.sh        (BUILD=build/release by default)
#   ROUNDS=3                        rounds (default 3)
#   INTERFACES=1001                 interfaces of the big project (default 1,001)
#   SETTLE=15                       seconds after the start before idle is measured (default 15)
#   IDLE=20                         seconds of idle CPU measured (default 20)
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start
rounds=${ROUNDS:-3}
n=${INTERFACES:-1001}
idle=${IDLE:-20}
settle=${SETTLE:-15}
hz=$(getconf CLK_TCK)
# Ports base .. base+n-1 for the big project, one above for the small one:
# below Linux's ephemeral range (32768 up), which any outgoing connection
# may take from under a listener.
base=$((10000 + RANDOM % (22000 - n)))

# project DIR COUNT FIRST_PORT
project() {
  local dir="$1" i
  rm -rf "$dir"
  mkdir -p "$dir/interfaces"
  printf 'api: { listen: off }\nisolates: { workers: 2, heap_mb: 256 }\n' > "$dir/ductus.yaml"
  for i in $(seq 1 "$2"); do
    mkdir -p "$dir/interfaces/i$i"
    printf 'source:\n  mllp: { listen: 127.0.0.1:%s }\nformat: hl7v2\n' $(($3 + i - 1)) \
      > "$dir/interfaces/i$i/interface.yaml"
    printf 'destination:\n  file: { path: out/i%s/ }\n' "$i" >> "$dir/interfaces/i$i/interface.yaml"
    echo 'export function transform(msg) { return msg; }' > "$dir/interfaces/i$i/transform.js"
  done
}

# start_ms DIR DB: runs the engine (debug log) until started; sets
# started_ms to "outside_ms engine_ms". The started line is waited for by
# a reader of the engine's output (through a FIFO), not by polling its log:
# a grep and a sleep every 5 ms took a sixth of the two cores' samples in
# a profile of a 1,001-interface start, from the start being measured.
start_ms() {
  local t0 t1 fifo="$work/started.fifo"
  rm -f "$fifo"
  mkfifo "$fifo"
  t0=$(date +%s%N)
  "$build/ductus" run "$1" --database "$2" --log-level debug \
    > >(tee "$work/engine.log" | { grep -m1 -q "started:" && date +%s%N; cat > /dev/null; } > "$fifo") 2>&1 &
  engine_pid=$!
  if ! read -r -t 60 t1 < "$fifo" || [ -z "$t1" ]; then
    tail -5 "$work/engine.log" >&2
    return 1
  fi
  # tee may hand the line to the reader before it is in the file.
  for _ in $(seq 1 200); do grep -q "started:" "$work/engine.log" && break; sleep 0.005; done
  started_ms="$(( (t1 - t0) / 1000000 )) $(sed -n 's/.*started: [0-9]* interface(s) in \([0-9]*\) ms.*/\1/p' "$work/engine.log")"
}

# run SIDE ROUND: prints "first_outside first_engine again_outside again_engine settle_share cpu_share rss_mb"
run() {
  local side="$1" r="$2" db first again t0 t1 rss
  db="$(new_db "start_${side}_$r")"
  start_ms "$work/$side" "$db" || return 1
  first=$started_ms
  engine_stop
  start_ms "$work/$side" "$db" || return 1
  again=$started_ms
  cp "$work/engine.log" "$work/$side-$r.log"
  rss=$(rss_kb "$engine_pid")
  t0=$(cpu_ticks "$engine_pid")
  sleep "$settle"
  t1=$(cpu_ticks "$engine_pid")
  sleep "$idle"
  t2=$(cpu_ticks "$engine_pid")
  engine_stop
  echo "$first $again $(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$settle" \
    'BEGIN { printf "%.4f", (b - a) / hz / s }') $(awk -v a="$t1" -v b="$t2" -v hz="$hz" -v s="$idle" \
    'BEGIN { printf "%.4f", (b - a) / hz / s }') $(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')"
}

project "$work/one" 1 $((base + n))
project "$work/many" "$n" "$base"

declare -A col
for r in $(seq 1 "$rounds"); do
  order="one many"
  [ $((r % 2)) -eq 0 ] && order="many one"
  for side in $order; do
    out=$(run "$side" "$r") || { echo "bench: the $side engine did not start" >&2; exit 1; }
    read -r fo fe ao ae settling cpu rss <<< "$out"
    col[$side.fo]+="$fo " col[$side.fe]+="$fe " col[$side.ao]+="$ao " col[$side.ae]+="$ae "
    col[$side.settle]+="$settling " col[$side.cpu]+="$cpu " col[$side.rss]+="$rss "
    echo "round $r $side: first start ${fo} ms (engine: ${fe} ms), again ${ao} ms (engine: ${ae} ms), first ${settle} s ${settling} of a core, idle ${cpu} of a core, ${rss} MB" >&2
  done
done

med() { printf '%s\n' $1 | median "${2:-%.0f}"; }
pct() { awk -v a="$1" 'BEGIN { printf "%.2f %%", a * 100 }'; }
echo
echo "Start-up: $n MLLP interfaces against 1 (file destination, pass-through, 2 workers), $rounds rounds (median)"
printf '| %-10s | %-14s | %-14s | %-10s | %-13s | %-10s | %-9s |\n' interfaces "first start ms" "again ms" "limit ms" "CPU first ${settle} s" "idle CPU" "RSS MB"
printf '| %-10s | %-14s | %-14s | %-10s | %-13s | %-10s | %-9s |\n' ---------- -------------- -------------- ---------- ------------- ---------- ---------
for side in one many; do
  count=1; [ "$side" = many ] && count=$n
  printf '| %-10s | %-14s | %-14s | %-10s | %-13s | %-10s | %-9s |\n' "$count" \
    "$(med "${col[$side.fo]}") ($(med "${col[$side.fe]}"))" "$(med "${col[$side.ao]}") ($(med "${col[$side.ae]}"))" \
    "$([ "$side" = many ] && echo 500 || echo -)" "$(pct "$(med "${col[$side.settle]}" %.4f)")" \
    "$(pct "$(med "${col[$side.cpu]}" %.4f)")" "$(med "${col[$side.rss]}" %.1f)"
done
echo "(outside: exec to the started line; in brackets the engine's own figure. Idle: the ${idle} s after the first ${settle}; its limit: 0.30 % for $n.)"
echo
for side in one many; do
  count=1; [ "$side" = many ] && count=$n
  echo "The last $count-interface start (again), step by step (its debug log):"
  sed -n 's/.*debug start-up: /  /p' "$work/$side-$rounds.log"
done
