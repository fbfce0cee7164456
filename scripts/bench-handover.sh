#!/usr/bin/env bash
# bench-handover: 4 MLLP senders at a steady rate (RATE, 300 messages a
# second in all) through an engine that delivers to an MLLP receiver, while
#   1. `ductus handover` replaces the engine (supervisor/handover.h), and
#   2. a plain restart (SIGTERM, then a new start) of an engine started with
#      its socket through LISTEN_FDS, as systemd starts it: the socket stays
#      open, connections queue while no engine runs.
# For each: connections refused (target 0), the longest ACK wait, the
# acknowledged messages that never arrived, and how long sending paused:
# the longest gap between two arrivals at the receiver around the event
# (at 300/s they are ~3 ms apart; target < 50 ms for the handover).
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start
[ -n "${BENCH_NO_BUILD:-}" ] || cmake --build "$build" --target handover_load >/dev/null
TOOL="$build/tests/bench/handover_load"
rate=${RATE:-300}
senders=4
port=$((20000 + RANDOM % 20000))
rport=$((port + 1))

dir="$work/p"
mkdir -p "$dir/interfaces/adt"
printf 'api: { listen: off }\nisolates: { workers: 1, heap_mb: 256 }\n' > "$dir/ductus.yaml"
printf 'source:\n  mllp: { listen: 127.0.0.1:%s }\nformat: hl7v2\ndestination:\n  mllp: { host: 127.0.0.1, port: %s }\n' \
  "$port" "$rport" > "$dir/interfaces/adt/interface.yaml"
echo 'export function transform(msg) { return msg; }' > "$dir/interfaces/adt/transform.js"

wait_for_line() {  # wait_for_line FILE TEXT COUNT
  for _ in $(seq 1 300); do
    [ "$(grep -c "$2" "$1" 2>/dev/null || true)" -ge "$3" ] && return 0
    sleep 0.05
  done
  echo "bench: no '$2' (x$3) in $1:" >&2; cat "$1" >&2; return 1
}

# stats NAME: one table row from $work/NAME.{send,recv,out} and the event's
# start and end ($e0, $e1, epoch µs).
stats() {
  local refused lost dups wait_max wait_event gap gap_normal
  refused=$(sed -n 's/^refused=//p' "$work/$1.out")
  wait_max=$(awk '$2 > m { m = $2 } END { printf "%.1f", m / 1000 }' "$work/$1.send")
  wait_event=$(awk -v a="$e0" -v b="$e1" '$1 < b && $1 + $2 > a && $2 > m { m = $2 }
                 END { printf "%.1f", m / 1000 }' "$work/$1.send")
  lost=$(awk 'NR == FNR { got[$2] = 1; next } !($3 in got) { n++ } END { print n + 0 }' \
           "$work/$1.recv" "$work/$1.send")
  dups=$(awk '{ c[$2]++ } END { for (k in c) if (c[k] > 1) n++; print n + 0 }' "$work/$1.recv")
  # Gaps between arrivals: the longest from 1 s before the event to 2 s
  # after it, and the 99th percentile of the rest (the steady rhythm).
  sort -n "$work/$1.recv" | awk -v a="$e0" -v b="$e1" '
    NR > 1 { g = $1 - p; if (p >= a - 1e6 && $1 <= b + 2e6) { if (g > w) w = g } else print g > "/dev/stderr" }
    { p = $1 } END { printf "%.1f", w / 1000 }' > "$work/$1.gap" 2> "$work/$1.gaps"
  gap=$(cat "$work/$1.gap")
  gap_normal=$(sort -n "$work/$1.gaps" | awk '{ a[NR] = $1 } END { if (NR) printf "%.1f", a[int(NR * 0.99) + 1] / 1000; else print "n/a" }')
  printf '| %s | %s | %s | %s | %s | %s | %s (p99 otherwise %s) |\n' "$1" \
    "$(wc -l < "$work/$1.send")" "$refused" "$wait_max" "$wait_event" "$lost/$dups" "$gap" "$gap_normal"
}

# 1. Handover.
db="$(new_db b_handover)"
"$TOOL" receive "$rport" "$work/handover.recv" &
recv_pid=$!
control="$work/control"
"$build/ductus" run "$dir" --database "$db" --control "$control" > "$work/engine.log" 2>&1 &
engine_pid=$!
wait_for_line "$work/engine.log" "started:" 1
"$TOOL" send 127.0.0.1 "$port" "$senders" "$rate" "$work/handover.send" > "$work/handover.out" &
send_pid=$!
sleep 3
e0=$(date +%s%6N)
"$build/ductus" handover --control "$control" > "$work/handover.cmd" 2>&1 \
  || { cat "$work/handover.cmd" "$work/engine.log" >&2; exit 1; }
e1=$(date +%s%6N)
new_pid=$(sed -n 's/.*pid \([0-9]*\).*/\1/p' "$work/handover.cmd")
sleep 3
touch "$work/handover.send.stop"
wait "$send_pid"
sleep 1
touch "$work/handover.recv.stop"
wait "$recv_pid" || true
wait "$engine_pid" || true  # the old engine exited 0 at the handover
engine_pid="$new_pid"
engine_stop
# Not our child (the old engine's): wait until it is gone, or a zombie.
for _ in $(seq 1 400); do
  state=$(ps -o stat= -p "$new_pid" 2>/dev/null || true)
  [ -z "$state" ] || [ "${state:0:1}" = Z ] && break
  sleep 0.05
done
h0=$e0 h1=$e1
handover_ms=$(awk -v a="$e0" -v b="$e1" 'BEGIN { printf "%.0f", (b - a) / 1000 }')
took=$(sed -n 's/.*took over 1 interface(s) in \([0-9]*\) ms.*/\1/p' "$work/engine.log")
row_handover=$(stats handover)

# 2. A plain restart of a LISTEN_FDS-started engine.
db="$(new_db b_restart)"
"$TOOL" receive "$rport" "$work/restart.recv" &
recv_pid=$!
"$TOOL" launch "$port" "mllp-127.0.0.1-$port" "$work/restart.trigger" -- \
  "$build/ductus" run "$dir" --database "$db" --control "$control" > "$work/restart.log" 2>&1 &
launch_pid=$!
wait_for_line "$work/restart.log" "started:" 1
"$TOOL" send 127.0.0.1 "$port" "$senders" "$rate" "$work/restart.send" > "$work/restart.out" &
send_pid=$!
sleep 3
e0=$(date +%s%6N)
touch "$work/restart.trigger"
wait_for_line "$work/restart.log" "started:" 2
e1=$(date +%s%6N)
sleep 3
touch "$work/restart.send.stop"
wait "$send_pid"
sleep 1
touch "$work/restart.recv.stop"
wait "$recv_pid" || true
touch "$work/restart.trigger.stop"
wait "$launch_pid" || true
restart_ms=$(awk -v a="$e0" -v b="$e1" 'BEGIN { printf "%.0f", (b - a) / 1000 }')
row_restart=$(stats restart)

echo
echo "$senders MLLP senders at $rate messages/s in all, one message at a time each, through"
echo "an engine delivering to an MLLP receiver (api off, 1 worker):"
echo "  handover: \`ductus handover\` took $handover_ms ms (the new engine took charge in ${took:-?} ms"
echo "            after the old one released)"
echo "  restart:  SIGTERM to a LISTEN_FDS-started engine, then a new start: $restart_ms ms to its"
echo "            started line"
echo
echo "| event | ACKs | refused (target 0) | longest ACK wait ms | longest ACK wait during the event ms | lost/duplicated | sending paused ms (handover target < 50) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
echo "$row_handover"
echo "$row_restart"
echo
