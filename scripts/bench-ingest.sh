#!/usr/bin/env bash
# Intake throughput: MLLP ACKs/s at 1 and 16 connections (strict and
# relaxed, every message filtered; and strict with a file destination
# delivering each message meanwhile) and HTTP 202s/s at 16, each next to
# pgbench's single-row INSERT
# rate at the same concurrency on the same cluster: durable for strict rows;
# for relaxed rows, pgbench with synchronous_commit=off in a column of its
# own, since relaxed commits asynchronously too (a ratio to the durable rate
# would credit the engine with the fsync it skips). Also: file ingest
# of 100,000 CSV rows with split: records (relaxed); at one connection the
# round trip of an echo server that stores nothing (what one more process
# hop costs beside pgbench's commit); and one connection's ceiling, the
# engine's own insert statement run by pgbench. The strict rows again with
# the destination paused (intake alone, no delivery beside it), and for
# each MLLP row where the machine's CPU went (bench-lib's cpu_per_message):
# core-µs a message, the idle share, and the rate with every core busy;
# and the WAL written a message, delivery's included.
#
#   scripts/bench-ingest.sh            (BUILD=build/release by default)
#   ROUNDS=3                           rounds per figure (default 3)
#   PGBENCH_SECONDS=5                  each pgbench run (default 5)
#
# This machine's speed drifts (2x within an hour), so a rate measured
# minutes after its pgbench figure can't be compared with it. Each round
# measures pgbench and then the engine, back to back, each on a fresh
# database (pgbench_rate, new_db); a row shows the medians and the median of
# the rounds' own ratios, and each round's ratio.
#
# Targets: strict >= 0.8 x pgbench at 1 and at 16 connections; with a file
# destination delivering, >= 0.45 at 1 and >= 0.6 at 16; file ingest
# >= 100,000 rows/s.
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start
rounds=${ROUNDS:-3}
PGBENCH_SECONDS=${PGBENCH_SECONDS:-5}
port=$((20000 + RANDOM % 20000))

# project DIR DURABILITY SOURCE FORMAT [TRANSFORM [OUT]]: OUT is the file
# destination's folder (out/ unless given).
project() {
  mkdir -p "$1/interfaces/in"
  printf 'api: { listen: off }\nisolates: { workers: 1, heap_mb: 256 }\n' > "$1/ductus.yaml"
  printf 'source:\n  %s\nformat: %s\ndurability: %s\ndestination:\n  file: { path: %s }\n' \
    "$3" "$4" "$2" "${6:-out/}" > "$1/interfaces/in/interface.yaml"
  # Filtered unless TRANSFORM says otherwise: this measures intake; the
  # delivery loop still runs each transform.
  echo "${5:-export function transform() { return null; \}}" > "$1/interfaces/in/transform.js"
}

# The round trip one MLLP sender can't beat: an echo server that answers
# each frame at once, storing nothing. An engine's ACK at one connection
# costs that round trip plus a durable commit, in series.
"$LOAD" --echo "$port" > "$work/echo.out" &
echo_pid=$!
until grep -qs listening "$work/echo.out"; do sleep 0.05; done
echo1=$("$LOAD" 127.0.0.1 "$port" 1 20000 | rate_of)
kill "$echo_pid"; wait "$echo_pid" 2>/dev/null || true

rows=() cpu_rows=()
# measured CONNS N [paused]: the load client sends N messages over CONNS
# connections to the engine on round_db; sets rate, and adds to cpus a
# line of the round's figures: the machine's CPU for them
# (cpu_per_message: "µs idle ceiling") and the WAL the cluster wrote a
# message, from the first message until every delivery is done (unless
# its destination is paused): what the database writes for a message and
# its delivery, a figure that hardly varies from round to round, where
# the rates swing with the machine.
measured() {
  local c0 c1 w0 w1
  w0=$(psql "$round_db" -Atc "SELECT pg_current_wal_lsn()")
  c0=$(machine_cpu)
  rate=$("$LOAD" 127.0.0.1 "$port" "$1" "$2" | rate_of)
  c1=$(machine_cpu)
  [ "${3:-}" = paused ] || wait_delivered "$round_db" 600 || true
  w1=$(psql "$round_db" -Atc "SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$w0') / $2)")
  cpus+="$(cpu_per_message "$c0" "$c1" "$2" "$rate") $w1"$'\n'
}

# engine_round DIR DBNAME CONNS DURABILITY [paused]: a round. pgbench at
# CONNS (durable, or relaxed as bench-lib's pgbench_rate says), then the
# engine on a fresh database, DBNAME (its destinations paused first, if
# asked), under the load (measured); adds the round's two figures to
# rates and pgs, and leaves the database's connection string in round_db.
engine_round() {
  local pg
  pg=$(pgbench_rate "$3" "$4")
  round_db="$(new_db "$2")"
  engine_start "$1" "$round_db"
  if [ "${5:-}" = paused ]; then
    engine_stop
    psql "$round_db" -qc "INSERT INTO destination_pauses (destination_id, paused_by) SELECT id, 'bench' FROM destinations"
    engine_start "$1" "$round_db"
  fi
  measured "$3" $(( $3 == 1 ? 3000 : 16000 )) "${5:-}"
  engine_stop
  rates+=" $rate" pgs+=" $pg"
}

# row LABEL CONNS DURABILITY "RATES" "PGBENCHES": a table row from the
# rounds' figures; the limit goes in the column of its durability. With
# cpus set (measured), a row of the CPU table too: the rounds' medians,
# and each round's ceiling as a ratio to its own pgbench.
row() {
  local rates=($4) pgs=($5) ratios=() i pg
  for i in "${!rates[@]}"; do ratios+=("$(ratio "${rates[$i]}" "${pgs[$i]}")"); done
  pg=$(printf '%s\n' "${pgs[@]}" | median)
  if [ "$3" = relaxed ]; then pg="- | $pg"; else pg="$pg | -"; fi
  rows+=("| $1 | $2 | $(printf '%s\n' "${rates[@]}" | median) | $pg \
| $(printf '%s\n' "${ratios[@]}" | median %.2f) | ${ratios[*]} |")
  [ -n "${cpus:-}" ] || return 0
  local us=() idle=() ceil=() cratios=() wal=()
  while read -r u d c w; do us+=("$u") idle+=("$d") ceil+=("$c") wal+=("$w"); done <<< "${cpus%$'\n'}"
  for i in "${!ceil[@]}"; do cratios+=("$(ratio "${ceil[$i]}" "${pgs[$i]}")"); done
  cpu_rows+=("| $1 | $2 | $(printf '%s\n' "${us[@]}" | median) \
| $(printf '%s\n' "${idle[@]}" | median %.2f) | $(printf '%s\n' "${ceil[@]}" | median) \
| $(printf '%s\n' "${cratios[@]}" | median %.2f) | ${cratios[*]} \
| $(printf '%s\n' "${wal[@]}" | median) |")
  cpus=""
}

# One connection, strict: also the echo-and-commit series and the ceiling.
s1_rates="" s1_pgs="" s1_stmts=""
for durability in strict relaxed; do
  for conns in 1 16; do
    rates="" pgs=""
    dir="$work/p-$durability-$conns"
    project "$dir" "$durability" "mllp: { listen: 127.0.0.1:$port }" hl7v2
    for r in $(seq 1 "$rounds"); do
      engine_round "$dir" "b_${durability}_${conns}_$r" "$conns" "$durability"
      if [ "$durability-$conns" = strict-1 ]; then
        s1_stmts+=" $(pgbench_statement_rate 1 "$round_db")"
      fi
    done
    row "MLLP ACKs/s, $durability" "$conns" "$durability" "$rates" "$pgs"
    [ "$durability-$conns" = strict-1 ] && s1_rates=$rates s1_pgs=$pgs
  done
done

# Intake alone: the strict rows again with the destination paused (a row in
# destination_pauses before the second start, as `ductusctl pause` leaves
# it), so no delivery loop reads, transforms or settles beside the senders.
# What the filtered rows' delivery costs intake, and how far intake alone
# gets.
for conns in 1 16; do
  rates="" pgs=""
  for r in $(seq 1 "$rounds"); do
    engine_round "$work/p-strict-$conns" "b_alone_${conns}_$r" "$conns" strict paused
  done
  row "MLLP ACKs/s, strict, intake alone (its destination paused)" "$conns" strict "$rates" "$pgs"
done

# Ingest while delivery writes: every message passes to the file
# destination (sync: group, the default), whose writes and syncs share the
# disk with PostgreSQL's WAL flushes while the senders stream.
for conns in 1 16; do
  rates="" pgs=""
  dir="$work/p-deliver-$conns"
  for r in $(seq 1 "$rounds"); do
    # A folder of its own each round (keep_files in bench-lib.sh).
    project "$dir" strict "mllp: { listen: 127.0.0.1:$port }" hl7v2 \
      'export function transform(msg) { return msg; }' "out/r$r/"
    engine_round "$dir" "b_deliver_${conns}_$r" "$conns" strict
  done
  row "MLLP ACKs/s, strict, a file destination delivering" "$conns" strict "$rates" "$pgs"
done

rates="" pgs=""
dir="$work/p-http"
project "$dir" strict "http: { listen: 127.0.0.1:$port, path: /in }" json
for r in $(seq 1 "$rounds"); do
  pg=$(pgbench_rate 16)
  engine_start "$dir" "$(new_db "b_http_$r")"
  rate=$("$LOAD" 127.0.0.1 "$port" 16 16000 --http /in | rate_of)
  engine_stop
  rates+=" $rate" pgs+=" $pg"
done
row "HTTP 202s/s, strict" 16 strict "$rates" "$pgs"

# The file: timed by the clock around it (including the two polls that wait
# for it to be still), and by the engine's own log from "storing" to
# "stored": the ingest alone.
secs_of() { sed -n "s/^[0-9-]*T\([0-9:.]*\) .*$1.*/\1/p" "$work/engine.log" | head -1 \
  | awk -F: '{ printf "%.3f", $1 * 3600 + $2 * 60 + $3 }'; }
frates="" irates=""
dir="$work/p-file"
project "$dir" relaxed 'file: { path: in/, pattern: "*.csv", split: records, move_to: done/, poll: 100ms }' csv
for r in $(seq 1 "$rounds"); do
  rm -rf "$dir/in" "$dir/done" "$dir/out"
  fdb="$(new_db "b_file_$r")"
  engine_start "$dir" "$fdb"
  mkdir -p "$dir/in"
  awk 'BEGIN { print "order_id,mrn,test_code,note"; for (i = 0; i < 100000; i++) printf "%d,MRN%d,T%d,\"note, %d\"\n", i, i % 500, i % 7, i }' > "$dir/in/.rows"
  mv "$dir/in/.rows" "$dir/in/rows.csv"
  t0=$(date +%s.%N)
  until [ -f "$dir/done/rows.csv" ]; do sleep 0.05; done
  t1=$(date +%s.%N)
  engine_stop
  n=$(psql "$fdb" -Atc "SELECT count(*) FROM messages")
  frates+=" $(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')"
  s0=$(secs_of "storing rows.csv"); s1=$(secs_of "rows.csv stored")
  irates+=" $(awk -v n="$n" -v a="$s0" -v b="$s1" 'BEGIN { if (b > a) printf "%.0f", n / (b - a); else print 0 }')"
done
rows+=("| file CSV rows/s (split: records, relaxed; includes the 2-poll readiness wait) | - | $(printf '%s\n' $frates | median) | - | - | - | $frates |")
rows+=("| file CSV rows/s, the ingest alone (engine log: storing → stored; target 100,000) | - | $(printf '%s\n' $irates | median) | - | - | - | $irates |")

echo
echo "$rounds rounds; each round measures pgbench, then the engine, each on a fresh database."
echo "Each ratio is to the limit in its row: strict to pgbench durable, relaxed to pgbench"
echo "with synchronous_commit=off (both commit without waiting for the WAL flush)."
echo
echo "| what | connections | rate (median) | pgbench INSERT/s, durable, same concurrency (median) | pgbench INSERT/s, synchronous_commit=off, same concurrency (median) | ratio to its limit (median of the rounds') | each round's ratio or rate |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"

strict1=$(printf '%s\n' $s1_rates | median)
pg1=$(printf '%s\n' $s1_pgs | median)
stmt1=$(printf '%s\n' $s1_stmts | median)
series1=$(awk -v a="$pg1" -v b="$echo1" 'BEGIN { printf "%.0f", 1 / (1 / a + 1 / b) }')
echo
echo "One connection: an echo server's round trip alone $echo1/s; that round trip and"
echo "pgbench's commit in series $series1/s; strict MLLP at 1 connection $strict1/s ="
echo "$(ratio "$strict1" "$series1") of that series (the target, 0.8, is of pgbench alone)."
echo
echo "One connection's ceiling: pgbench running the engine's own insert (a message and"
echo "its delivery row in one statement, prepared, as the engine runs it) commits $stmt1/s"
echo "(rounds:$s1_stmts), $(ratio "$stmt1" "$pg1") of pgbench's one-row INSERT, before any hop;"
echo "strict MLLP at 1 connection is $(ratio "$strict1" "$stmt1") of that statement alone."
stmt_series1=$(awk -v a="$stmt1" -v b="$echo1" 'BEGIN { if (a > 0 && b > 0) printf "%.0f", 1 / (1 / a + 1 / b); else print 0 }')
echo "That statement and the echo round trip in series: $stmt_series1/s, $(ratio "$stmt_series1" "$pg1")"
echo "of pgbench's one-row INSERT: what an engine that cost nothing but one hop would reach."

echo
echo "Where the machine's CPU went ($(nproc) cores; every process: the load client, the engine,"
echo "its workers, PostgreSQL): core-µs a message, the share left idle, and the rate the same"
echo "work a message would reach with every core busy (rate ÷ busy share), also as a ratio to"
echo "the row's pgbench. Less waiting can win at most up to that ceiling; past it, only less"
echo "work a message. And the WAL the cluster wrote a message, from the first message until"
echo "every delivery was done (the paused rows: until the last ACK): the database's work for"
echo "a message, steady from round to round where the rates are not."
echo
echo "| what | connections | core-µs a message (median) | idle share (median) | rate with every core busy (median) | ÷ pgbench (median of the rounds') | each round's | WAL bytes a message (median) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${cpu_rows[@]}"
