#!/usr/bin/env bash
# Monitoring: what judging 1,001 interfaces costs the engine (issue #31:
# a round under 50 ms, under 1 % of a core and under 10 MB more).
#
# One project of 1,001 HTTP interfaces on one port (a path each), each with
# monitor: expectations and a file destination; the engine runs it twice
# per round, on a fresh database each time, in turns (the order swapped
# every other round: this machine's speed drifts):
#   off: no alerts: (the last-activity keeper and the API's health run in
#        both: they are always on);
#   on:  alerts: with a rule for every state, a webhook channel and a
#        heartbeat (both to a closed port: nothing fires while all is ok).
# After WARMUP seconds (past the minute states need watching), the
# engine's CPU time (utime + stime, all threads) is read over MEASURE
# seconds, and its resident memory at the end. The "on" run's rounds log
# their cost at debug ("alerts: round N judged S subjects in X ms"): from
# its start to every step taken, the store's queries included.
#
# Printed: the round's median and worst against the 50 ms limit, the CPU
# each run used as a share of one core and their difference against the 1 %
# limit, the memory difference against 10 MB. Nothing here asserts a time.
#
#   scripts/bench-monitor.sh        (BUILD=build/release by default)
#   ROUNDS=2                        rounds (default 2)
#   INTERFACES=1001                 interfaces (default 1,001)
#   WARMUP=75 MEASURE=60            seconds (defaults)
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start
rounds=${ROUNDS:-2}
n=${INTERFACES:-1001}
warmup=${WARMUP:-75}
measure=${MEASURE:-60}
port=$((20000 + RANDOM % 20000))
closed=$((port + 1))
hz=$(getconf CLK_TCK)

# project DIR WITH_ALERTS
project() {
  local dir="$1" i
  rm -rf "$dir"
  mkdir -p "$dir/interfaces"
  { printf 'api: { listen: off }\nisolates: { workers: 2, heap_mb: 256 }\n'
    if [ "$2" = on ]; then
      printf 'alerts:\n  channels:\n    hook: { webhook: "http://127.0.0.1:%s/hook" }\n' "$closed"
      printf '  rules:\n    - { when: [stopped, paused, stalled, error, behind, late, quiet, expiring], severity: critical, notify: [hook] }\n'
      printf '  heartbeat: { url: "http://127.0.0.1:%s/beat", every: 1m }\n' "$closed"
    fi; } > "$dir/ductus.yaml"
  for i in $(seq 1 "$n"); do
    mkdir -p "$dir/interfaces/i$i"
    printf 'source:\n  http: { listen: 127.0.0.1:%s, path: /i%s }\nformat: json\n' "$port" "$i" \
      > "$dir/interfaces/i$i/interface.yaml"
    printf 'monitor:\n  behind: { waiting: 100, oldest: 10m }\n  active_within: 12h\n' \
      >> "$dir/interfaces/i$i/interface.yaml"
    printf 'destination:\n  file: { path: out/ }\n' >> "$dir/interfaces/i$i/interface.yaml"
    echo 'export function transform(msg) { return msg; }' > "$dir/interfaces/i$i/transform.js"
  done
}

# run SIDE ROUND: prints "cpu_share rss_mb" and leaves the log in $work/SIDE-ROUND.log
run() {
  local side="$1" r="$2" db t0 t1
  db="$(new_db "mon_${side}_$r")"
  ENGINE_START_SECONDS=${ENGINE_START_SECONDS:-180} engine_start "$work/$side" "$db" \
    || { echo "bench: the $side engine did not start" >&2; return 1; }
  sleep "$warmup"
  t0=$(cpu_ticks "$engine_pid")
  sleep "$measure"
  t1=$(cpu_ticks "$engine_pid")
  local rss
  rss=$(rss_kb "$engine_pid")
  engine_stop
  cp "$work/engine.log" "$work/$side-$r.log"
  awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$measure" -v rss="$rss" \
    'BEGIN { printf "%.4f %.1f\n", (b - a) / hz / s, rss / 1024 }'
}

project "$work/off" off
project "$work/on" on
# The "on" project logs at debug: its rounds say what they cost.
engine_start() {
  "$build/ductus" run "$1" --database "$2" --control "$work/control" \
    --log-level "$([ "$1" = "$work/on" ] && echo debug || echo info)" \
    >"$work/engine.log" 2>&1 &
  engine_pid=$!
  for _ in $(seq 1 $(( ${ENGINE_START_SECONDS:-20} * 10 ))); do
    grep -q "started:" "$work/engine.log" && return 0
    kill -0 "$engine_pid" 2>/dev/null || { cat "$work/engine.log" >&2; return 1; }
    sleep 0.1
  done
  cat "$work/engine.log" >&2
  return 1
}

offs=() ons=()
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then
    offs+=("$(run off "$r")"); ons+=("$(run on "$r")")
  else
    ons+=("$(run on "$r")"); offs+=("$(run off "$r")")
  fi
done

round_ms=$(cat "$work"/on-*.log | sed -n 's/.*alerts: round [0-9]* judged \([0-9]*\) subjects in \([0-9.]*\) ms.*/\2/p')
subjects=$(cat "$work"/on-*.log | sed -n 's/.*alerts: round [0-9]* judged \([0-9]*\) subjects.*/\1/p' | tail -1)
rounds_seen=$(echo "$round_ms" | grep -c . || true)
med_ms=$(echo "$round_ms" | median "%.1f")
max_ms=$(echo "$round_ms" | sort -n | tail -1)
cpu_off=$(printf '%s\n' "${offs[@]}" | awk '{ print $1 }' | median "%.4f")
cpu_on=$(printf '%s\n' "${ons[@]}" | awk '{ print $1 }' | median "%.4f")
rss_off=$(printf '%s\n' "${offs[@]}" | awk '{ print $2 }' | median "%.1f")
rss_on=$(printf '%s\n' "${ons[@]}" | awk '{ print $2 }' | median "%.1f")

echo
echo "monitoring: $n interfaces, $subjects subjects a round, $rounds_seen rounds, $rounds run(s) a side"
printf '%-34s %12s %12s %8s\n' "figure" "measured" "limit" "ratio"
printf '%-34s %12s %12s %8s\n' "round, median (ms)" "$med_ms" "50" "$(ratio "$med_ms" 50)"
printf '%-34s %12s %12s %8s\n' "round, worst (ms)" "$max_ms" "50" "$(ratio "$max_ms" 50)"
printf '%-34s %12s %12s\n' "CPU, alerts off (share of a core)" "$cpu_off" ""
printf '%-34s %12s %12s\n' "CPU, alerts on (share of a core)" "$cpu_on" ""
d_cpu=$(awk -v a="$cpu_on" -v b="$cpu_off" 'BEGIN { printf "%.4f", a - b }')
printf '%-34s %12s %12s %8s\n' "CPU added by alerts" "$d_cpu" "0.01" "$(ratio "$d_cpu" 0.01)"
printf '%-34s %12s %12s\n' "memory, alerts off (MB)" "$rss_off" ""
printf '%-34s %12s %12s\n' "memory, alerts on (MB)" "$rss_on" ""
d_rss=$(awk -v a="$rss_on" -v b="$rss_off" 'BEGIN { printf "%.1f", a - b }')
printf '%-34s %12s %12s %8s\n' "memory added by alerts (MB)" "$d_rss" "10" "$(ratio "$d_rss" 10)"
echo "rounds: off ${offs[*]} | on ${ons[*]}  (cpu share, rss MB)"
