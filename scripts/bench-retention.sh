#!/usr/bin/env bash
# Retention under load (issue #22): a day's partition of the 1w tier holding
# MESSAGES finished messages (each with its delivery) is dropped by `ductus
# retention run` while CONNECTIONS MLLP senders ingest into the same tables.
# Reports the longest ACK wait among the ACKs in flight during the drop
# (target < 100 ms), the same before it for comparison, and how long the
# drop took.
#
#   scripts/bench-retention.sh            (BUILD=build/release by default)
#   MESSAGES=1000000                      rows in the dropped day (default 1,000,000)
#   CONNECTIONS=16                        senders (default 16)
#
# The day is 40 days back, in partitions made by the engine's own function
# (ductus_ensure_partitions), filled with SQL (far quicker than through
# MLLP) and vacuumed and analysed, as a day's partition is by the time it
# expires. The engine runs first for 6 s, so its own start-up retention run
# (5 s after the start) has passed and found nothing: the drop measured is
# the one run on demand.
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start
[ -n "${BENCH_NO_BUILD:-}" ] || cmake --build "$build" --target ack_waits >/dev/null
messages=${MESSAGES:-1000000}
conns=${CONNECTIONS:-16}
port=$((20000 + RANDOM % 20000))

dir="$work/p"
mkdir -p "$dir/interfaces/in"
printf 'api: { listen: off }\nisolates: { workers: 1, heap_mb: 256 }\n' > "$dir/ductus.yaml"
printf 'source:\n  mllp: { listen: 127.0.0.1:%s }\nformat: hl7v2\nretention: 1w\ndestination:\n  file: { path: out/ }\n' \
  "$port" > "$dir/interfaces/in/interface.yaml"
# Filtered: this measures intake beside the drop, not delivery.
echo 'export function transform() { return null; }' > "$dir/interfaces/in/transform.js"

db="$(new_db b_retention)"
engine_start "$dir" "$db"
sleep 6

day=$(psql "$db" -Atc "SELECT to_char((now() AT TIME ZONE 'UTC')::date - 40, 'YYYYMMDD')")
t0=$(date +%s.%N)
psql "$db" -q -o /dev/null -v ON_ERROR_STOP=1 <<SQL
SELECT ductus_ensure_partitions(t, 7::int2, (now() AT TIME ZONE 'UTC')::date - 40, 0, 2000)
FROM unnest(ARRAY['messages', 'deliveries']) t;
WITH m AS (
  INSERT INTO messages (tier, received_at, interface_id, payload, status)
  SELECT 7, ((now() AT TIME ZONE 'UTC')::date - 40)::timestamp AT TIME ZONE 'UTC'
              + g * (interval '86399 seconds' / $messages),
         i.id,
         convert_to('MSH|^~\&|SEND|FAC|RECV|FAC|20260101120000||ADT^A01|OLD' || g
                    || '|P|2.5' || chr(13) || 'EVN|A01|20260101120000' || chr(13)
                    || 'PID|1||MRN' || (g % 5000) || '^^^H^MR||Doe^John^Q||19700101|M|||1 Main St^^Town^ST^12345'
                    || chr(13) || 'PV1|1|I|W^1^1' || chr(13), 'UTF8'),
         1
  FROM generate_series(1, $messages) g, (SELECT id FROM interfaces WHERE name = 'in') i
  RETURNING id, received_at)
INSERT INTO deliveries (message_id, destination_id, tier, received_at, status, attempts, updated_at)
SELECT m.id, d.id, 7, m.received_at, 1, 1, m.received_at
FROM m, (SELECT id FROM destinations LIMIT 1) d;
VACUUM ANALYZE messages_t7_$day, deliveries_t7_$day;
SQL
t1=$(date +%s.%N)
size=$(psql "$db" -Atc "SELECT pg_size_pretty(pg_total_relation_size('messages_t7_$day')
                                              + pg_total_relation_size('deliveries_t7_$day'))")
echo "filled messages_t7_$day and deliveries_t7_$day: $messages messages, $size," \
  "in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }') s"

# Senders from here on; the drop 5 s in; the senders go on 5 s after it.
"$build/tests/bench/ack_waits" 127.0.0.1 "$port" "$conns" 3600 "$work/acks.txt" > "$work/load.out" &
load_pid=$!
sleep 5
d0=$(date +%s%6N)
"$build/ductus" retention run "$dir" --database "$db" > "$work/drop.out" 2>&1
d1=$(date +%s%6N)
sleep 5
touch "$work/acks.txt.stop"
wait "$load_pid"
engine_stop
cat "$work/drop.out"

# Each ACK: sent at (epoch µs), its wait (µs), its code. "During": in flight
# at some moment between the drop's start and end. "Before": answered before
# the drop started.
stats() {  # stats LABEL FILTER
  # Through a file, and awk without an early exit: a pipe closed early by
  # `tail` or `exit` kills the writer with SIGPIPE, which pipefail turns
  # into the script's end (hundreds of thousands of ACKs fill the pipe).
  awk -v d0="$d0" -v d1="$d1" "$2 { print \$2 }" "$work/acks.txt" | sort -n > "$work/waits.txt"
  local n max p99 p50
  n=$(wc -l < "$work/waits.txt")
  max=$(awk '{ v = $0 } END { print v }' "$work/waits.txt")
  p99=$(awk -v n="$n" 'NR == int(n * 0.99) + 1 { v = $0 } END { print v }' "$work/waits.txt")
  p50=$(awk -v n="$n" 'NR == int(n * 0.50) + 1 { v = $0 } END { print v }' "$work/waits.txt")
  printf '| %s | %s | %s | %s | %s |\n' "$1" "$n" \
    "$(awk -v v="${p50:-0}" 'BEGIN { printf "%.1f", v / 1000 }')" \
    "$(awk -v v="${p99:-0}" 'BEGIN { printf "%.1f", v / 1000 }')" \
    "$(awk -v v="${max:-0}" 'BEGIN { printf "%.1f", v / 1000 }')"
}
echo
echo "Dropping a 1w day of $messages messages ($size) while $conns MLLP connections ingest:"
echo "the drop (ductus retention run: connect, count, detach concurrently, drop) took" \
  "$(awk -v a="$d0" -v b="$d1" 'BEGIN { printf "%.2f", (b - a) / 1e6 }') s."
echo
echo "| ACKs | count | p50 ms | p99 ms | longest ms (target during the drop: < 100) |"
echo "| --- | --- | --- | --- | --- |"
stats "before the drop" '$1 + $2 < d0'
stats "in flight during the drop" '$1 < d1 && $1 + $2 > d0'
stats "after the drop" '$1 > d1'
echo
echo "ACKs other than AA: $(awk '$3 != "AA"' "$work/acks.txt" | wc -l);" \
  "the dropped day's tables still there: $(psql "$db" -Atc "SELECT count(*) FROM pg_class WHERE relname IN ('messages_t7_$day', 'deliveries_t7_$day')")"
