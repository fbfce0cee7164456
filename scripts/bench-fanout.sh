#!/usr/bin/env bash
# Fan-out: 6,000 HL7 messages over 16 MLLP connections,
# strict durability, to 1, 5 and 25 file destinations. Prints ACKs/s, the
# time until everything is delivered, and deliveries/s, next to pgbench's
# durable single-row INSERT rate at 16 clients and the disk's durable file
# rate, both measured on the same cluster and disk.
#
#   scripts/bench-fanout.sh            (BUILD=build/release by default)
#   ROUNDS=3                           rounds per shape (default 3)
#   FANOUT_DESTS="25"                  one shape only
#   TOTAL=6000                         messages per run (default 6,000)
#   PGBENCH_SECONDS=5                  each pgbench run (default 5)
#   FANOUT_SYNC=group                  the file destinations' sync: (group, each)
#   STATEMENTS=1                       after each shape's last round, where the
#                                      database's time went (pg_stat_statements)
#
# This machine's speed drifts (2x within an hour): a limit measured once at
# the start and compared with a shape run minutes later says as much about
# the drift as about the engine. So each shape runs in rounds, and each
# round measures its limits and then the engine, back to back, each on a
# fresh database; a row shows the medians, the median of the rounds' own
# ratios, and each round's ratio.
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start
rounds=${ROUNDS:-3}
sync=${FANOUT_SYNC:-group}
total=${TOTAL:-6000}
PGBENCH_SECONDS=${PGBENCH_SECONDS:-5}
port=$((20000 + RANDOM % 20000))
mkdir -p "$work/disk"

# ratios "AS" "BS": each round's a / b.
ratios() {
  local as=($1) bs=($2) i out=()
  for i in "${!as[@]}"; do out+=("$(ratio "${as[$i]}" "${bs[$i]}")"); done
  echo "${out[*]}"
}
med() { printf '%s\n' $1 | median "${2:-%.0f}"; }

rows=()
for dests in ${FANOUT_DESTS:-1 5 25}; do
  dir="$work/fan-$dests"
  mkdir -p "$dir/interfaces/adt"
  printf 'api: { listen: off }\nisolates: { workers: 2, heap_mb: 256 }\n' > "$dir/ductus.yaml"
  echo 'export function transform(msg) { return msg; }' > "$dir/interfaces/adt/transform.js"
  acks="" pgs="" secs_all="" dps_all="" disks="" delivered=""
  want=$(( total * dests ))
  for r in $(seq 1 "$rounds"); do
    # Each round writes to folders of its own (keep_files in bench-lib.sh).
    {
      printf 'source:\n  mllp: { listen: 127.0.0.1:%s }\nformat: hl7v2\n' "$port"
      printf 'ordering: { key: PID.3.1, partitions: 16 }\ndurability: strict\ndestinations:\n'
      for d in $(seq 1 "$dests"); do printf '  d%s:\n    file: { path: out/r%s/d%s/, sync: %s }\n' "$d" "$r" "$d" "$sync"; done
    } > "$dir/interfaces/adt/interface.yaml"
    pg16=$(pgbench_rate 16)
    # The disk's own limit for file destinations, made durable as the
    # sender makes them (unnamed files linked to their names): each, 50 at
    # once (the file sender's pipeline depth); group, every destination's
    # 50 in one group, at most FileSyncGroup::kMaxGroup (1,024).
    disk="$work/disk/$dests-$r"
    mkdir -p "$disk"
    if [ "$sync" = group ]; then
      window=$(( 50 * dests < 1024 ? 50 * dests : 1024 ))
      disk16=$("$(dirname "$LOAD")/file_sync_rate" "$disk" 6000 "$window" group | sed -n 's/rate=//p')
    else
      disk16=$("$(dirname "$LOAD")/file_sync_rate" "$disk" 3000 50 each | sed -n 's/rate=//p')
    fi
    db="$(new_db "fan_${dests}_$r")"
    engine_start "$dir" "$db"
    statements_reset "$db"
    t0=$(date +%s.%N)
    ack=$("$LOAD" 127.0.0.1 "$port" 16 "$total" | rate_of)
    wait_delivered "$db" || true
    t1=$(date +%s.%N)
    done_n=$(psql "$db" -Atc "SELECT count(*) FROM deliveries WHERE status = 1")
    engine_stop
    [ "$r" = "$rounds" ] && statements_top "$db" "$dests destination(s), round $r" >> "$work/statements.txt"
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    acks+=" $ack" pgs+=" $pg16" disks+=" $disk16" secs_all+=" $secs" delivered+=" $done_n"
    dps_all+=" $(awk -v n="$done_n" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')"
  done
  ack_ratios=$(ratios "$acks" "$pgs")
  dps_ratios=$(ratios "$dps_all" "$disks")
  rows+=("| $dests | $(med "$acks") | $(med "$pgs") | $(med "$ack_ratios" %.2f) | $(med "$secs_all" %.1f) \
| $(med "$delivered")/$want | $(med "$dps_all") | $(med "$disks") | $(med "$dps_ratios" %.2f) \
| $ack_ratios | $dps_ratios |")
done

echo
echo "$rounds rounds a shape; each round measures pgbench (durable single-row INSERT, 16"
echo "clients, fresh database) and durable files the way sync: $sync makes them (each: written"
echo "unnamed, fsync, linked, folder fsync, 50 writers; group: 50 per destination written, syncfs,"
echo "linked, syncfs), then"
echo "the engine on a fresh database. Medians; ratios are the median of the rounds' own."
echo
echo "| destinations | ACKs/s | pgbench INSERT/s | ACKs ÷ pgbench | seconds until all delivered | delivered | deliveries/s | durable files/s | deliveries ÷ durable files | each round: ACKs ÷ pgbench | each round: deliveries ÷ files |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
if [ -f "$work/statements.txt" ]; then cat "$work/statements.txt"; fi
