#!/usr/bin/env bash
# Intake throughput: MLLP ACKs/s at 1 and 16 connections (strict and
# relaxed) and HTTP 202s/s at 16, each next to pgbench's durable single-row
# INSERT rate at the same concurrency on the same cluster in the same run.
# Also: file ingest of 100,000 CSV rows with split: records (relaxed), and
# at one connection the round trip of an echo server that stores nothing,
# to show what one more process hop costs beside pgbench's commit.
#
#   scripts/bench-ingest.sh            (BUILD=build/release by default)
#
# Targets (the issue): strict >= 0.8 x pgbench at 1 and at 16 connections;
# file ingest >= 100,000 rows/s.
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start

pg1=$(pgbench_rate 1)
pg16=$(pgbench_rate 16)
port=$((20000 + RANDOM % 20000))

# The round trip one MLLP sender can't beat: an echo server that answers
# each frame at once, storing nothing. An engine's ACK at one connection
# costs that round trip plus a durable commit, in series.
"$LOAD" --echo "$port" > "$work/echo.out" &
echo_pid=$!
until grep -q listening "$work/echo.out"; do sleep 0.05; done
echo1=$("$LOAD" 127.0.0.1 "$port" 1 20000 | sed -n 's/.*rate=\([0-9]*\).*/\1/p')
kill "$echo_pid"; wait "$echo_pid" 2>/dev/null || true
series1=$(awk -v a="$pg1" -v b="$echo1" 'BEGIN { printf "%.0f", 1 / (1 / a + 1 / b) }')

project() {  # project DIR DURABILITY SOURCE FORMAT
  mkdir -p "$1/interfaces/in"
  printf 'api: { listen: off }\nisolates: { workers: 1, heap_mb: 256 }\n' > "$1/ductus.yaml"
  printf 'source:\n  %s\nformat: %s\ndurability: %s\ndestination:\n  file: { path: out/ }\n' \
    "$3" "$4" "$2" > "$1/interfaces/in/interface.yaml"
  # Filtered: this measures intake; the delivery loop still runs each transform.
  echo 'export function transform() { return null; }' > "$1/interfaces/in/transform.js"
}

rows=()
for durability in strict relaxed; do
  for conns in 1 16; do
    dir="$work/p-$durability-$conns"
    project "$dir" "$durability" "mllp: { listen: 127.0.0.1:$port }" hl7v2
    db="$(new_db "b_${durability}_$conns")"
    engine_start "$dir" "$db"
    total=$(( conns == 1 ? 3000 : 16000 ))
    rate=$("$LOAD" 127.0.0.1 "$port" "$conns" "$total" | sed -n 's/.*rate=\([0-9]*\).*/\1/p')
    engine_stop
    [ "$durability-$conns" = strict-1 ] && stmt1=$(pgbench_statement_rate 1 "$db")
    pg=$([ "$conns" = 1 ] && echo "$pg1" || echo "$pg16")
    rows+=("| MLLP ACKs/s, $durability | $conns | $rate | $pg | $(ratio "$rate" "$pg") |")
    [ "$durability-$conns" = strict-1 ] && strict1=$rate
  done
done

dir="$work/p-http"
project "$dir" strict "http: { listen: 127.0.0.1:$port, path: /in }" json
engine_start "$dir" "$(new_db b_http)"
rate=$("$LOAD" 127.0.0.1 "$port" 16 16000 --http /in | sed -n 's/.*rate=\([0-9]*\).*/\1/p')
engine_stop
rows+=("| HTTP 202s/s, strict | 16 | $rate | $pg16 | $(ratio "$rate" "$pg16") |")

dir="$work/p-file"
project "$dir" relaxed 'file: { path: in/, pattern: "*.csv", split: records, move_to: done/, poll: 100ms }' csv
fdb="$(new_db b_file)"
engine_start "$dir" "$fdb"
mkdir -p "$dir/in"
awk 'BEGIN { print "order_id,mrn,test_code,note"; for (i = 0; i < 100000; i++) printf "%d,MRN%d,T%d,\"note, %d\"\n", i, i % 500, i % 7, i }' > "$dir/in/.rows"
mv "$dir/in/.rows" "$dir/in/rows.csv"
t0=$(date +%s.%N)
until [ -f "$dir/done/rows.csv" ]; do sleep 0.05; done
t1=$(date +%s.%N)
engine_stop
n=$(psql "$fdb" -Atc "SELECT count(*) FROM messages")
frate=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
rows+=("| file CSV rows/s (split: records, relaxed; includes the 2-poll readiness wait) | - | $frate | - | - |")
# The same file timed by the engine's own log, from "storing" to "stored":
# the ingest alone, without the polls that wait for the file to be still.
secs_of() { sed -n "s/^[0-9-]*T\([0-9:.]*\) .*$1.*/\1/p" "$work/engine.log" | head -1 \
  | awk -F: '{ printf "%.3f", $1 * 3600 + $2 * 60 + $3 }'; }
s0=$(secs_of "storing rows.csv"); s1=$(secs_of "rows.csv stored")
irate=$(awk -v n="$n" -v a="$s0" -v b="$s1" 'BEGIN { if (b > a) printf "%.0f", n / (b - a); else print "n/a" }')
rows+=("| file CSV rows/s, the ingest alone (engine log: storing → stored; target 100,000) | - | $irate | - | - |")

echo
echo "| what | connections | rate | pgbench INSERT/s same concurrency | ratio |"
echo "| --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
echo
echo "One connection: an echo server's round trip alone $echo1/s; that round trip and"
echo "pgbench's commit in series $series1/s; strict MLLP at 1 connection $strict1/s ="
echo "$(ratio "$strict1" "$series1") of that series (the target, 0.8, is of pgbench alone)."
echo
echo "One connection's ceiling: pgbench running the engine's own insert (a message and"
echo "its delivery row in one statement, prepared, as the engine runs it) commits ${stmt1:-n/a}/s,"
echo "$(ratio "${stmt1:-0}" "$pg1") of pgbench's one-row INSERT, before any hop; strict MLLP at 1"
echo "connection is $(ratio "$strict1" "${stmt1:-0}") of that statement alone."
