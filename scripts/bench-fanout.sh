#!/usr/bin/env bash
# Fan-out: 6,000 HL7 messages over 16 MLLP connections,
# strict durability, to 1, 5 and 25 file destinations. Prints ACKs/s, the
# time until everything is delivered, and deliveries/s, next to pgbench's
# durable single-row INSERT rate at 16 clients on the same cluster.
#
#   scripts/bench-fanout.sh            (BUILD=build/release by default)
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start

pg16=$(pgbench_rate 16)
# The disk's own limit for file destinations, measured beside pgbench: the
# file sender's write, fsync and rename, 16 at once (its pipeline depth).
mkdir -p "$work/disk"
disk16=$("$(dirname "$LOAD")/file_sync_rate" "$work/disk" 3000 16 | sed -n 's/rate=//p')
port=$((20000 + RANDOM % 20000))
total=6000
rows=()
for dests in ${FANOUT_DESTS:-1 5 25}; do  # FANOUT_DESTS="25": one shape only
  dir="$work/fan-$dests"
  mkdir -p "$dir/interfaces/adt"
  printf 'api: { listen: off }\nisolates: { workers: 2, heap_mb: 256 }\n' > "$dir/ductus.yaml"
  {
    printf 'source:\n  mllp: { listen: 127.0.0.1:%s }\nformat: hl7v2\n' "$port"
    printf 'ordering: { key: PID.3.1, partitions: 16 }\ndurability: strict\ndestinations:\n'
    for d in $(seq 1 "$dests"); do printf '  d%s:\n    file: { path: out/d%s/ }\n' "$d" "$d"; done
  } > "$dir/interfaces/adt/interface.yaml"
  echo 'export function transform(msg) { return msg; }' > "$dir/interfaces/adt/transform.js"
  db="$(new_db "fan_$dests")"
  engine_start "$dir" "$db"
  t0=$(date +%s.%N)
  ack=$("$LOAD" 127.0.0.1 "$port" 16 "$total" | rate_of)
  want=$(( total * dests ))
  # Done when no delivery is pending: every message is stored before its
  # ACK, so all deliveries exist by now. One probe of the queue's partial
  # index; counting the delivered rows every 0.1 s instead scanned the whole
  # table each time (150,000 rows and their dead versions at 25
  # destinations) and took CPU from the engine it was timing.
  for _ in $(seq 1 1200); do
    pending=$(psql "$db" -Atc "SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE status = 0 LIMIT 1) p")
    [ "$pending" = 0 ] && break
    sleep 0.1
  done
  t1=$(date +%s.%N)
  done_n=$(psql "$db" -Atc "SELECT count(*) FROM deliveries WHERE status = 1")
  engine_stop
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  dps=$(awk -v n="$done_n" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')
  rows+=("| $dests | $ack | $(ratio "$ack" "$pg16") | $secs | $done_n/$want | $dps | $(ratio "$dps" "$disk16") |")
done

echo
echo "pgbench durable single-row INSERT, 16 clients: $pg16/s"
echo "durable files (write, fsync, rename), 16 writers: $disk16/s"
echo
echo "| destinations | ACKs/s | ACKs ÷ pgbench | seconds until all delivered | delivered | deliveries/s | deliveries ÷ durable files |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
