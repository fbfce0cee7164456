# Shared by scripts/bench-*.sh: a throwaway cluster, pgbench's single-row
# INSERT rate on it (the limit every figure is a ratio to), and
# running the engine on a generated project. Sourced, not run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD:-$here/build/release}"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"

bench_start() {
  [ -x "$build/ductus" ] || "$here/scripts/build.sh" release >/dev/null
  # BENCH_NO_BUILD=1: measure the binaries as they are (e.g. while the tree
  # is mid-edit).
  [ -n "${BENCH_NO_BUILD:-}" ] || cmake --build "$build" --target ductus mllp_load file_sync_rate >/dev/null
  LOAD="$build/tests/bench/mllp_load"
  pgdir="$(mktemp -d /tmp/ductus-bench.XXXXXX)"
  work="$(mktemp -d /tmp/ductus-bench-work.XXXXXX)"
  trap 'bench_stop' EXIT
  # STATEMENTS=1: the cluster keeps pg_stat_statements, and benches that
  # support it print where the database's time went (statements_top).
  local extra=""
  [ -n "${STATEMENTS:-}" ] && extra="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
  url="$(PG_EXTRA_OPTIONS="$extra" "$here/scripts/pg.sh" start "$pgdir")"
  echo "INSERT INTO bench_rows (payload) VALUES ('x');" > "$work/insert.sql"
}

# keep_files: nothing a run writes is deleted before the bench ends; each
# round writes to folders of its own. On ext4 without a journal (this
# machine's disk), creating a file skips every inode deleted in the last
# 60 s (360 s while its inode table block is dirty), reading each one's
# block to check its deletion time (recently_deleted() in the kernel's
# ialloc.c). A round of bench-ingest's delivering row that first deleted
# the last round's 16,000 files spent 40 % of all CPU samples in that
# scan, and such rounds came out at half the ACKs, at random. A journalled
# ext4 and xfs don't do this. The whole work folder goes at the end, and
# sync writes those deletions out (a bench started within the next minute
# may still pay for them).
bench_stop() {
  [ -n "${engine_pid:-}" ] && kill -9 "$engine_pid" 2>/dev/null || true
  "$here/scripts/pg.sh" stop "$pgdir" || true
  rm -rf "$work"
  sync
}

# pgbench_rate CLIENTS [relaxed]: single-row INSERTs per second, durable
# (each commit waits for its WAL flush), or with `relaxed` as the engine's
# relaxed durability commits: synchronous_commit off, no wait. Each call
# starts from a fresh database and an empty table, as each engine run starts
# from new_db: a table warmed and vacuumed by earlier rounds would give
# pgbench an advantage the engine never has.
pgbench_rate() {
  local db opts=""
  db="$(new_db bench_pgbench)"
  psql "$db" -qc "CREATE TABLE bench_rows (id bigserial PRIMARY KEY, payload text)"
  [ "${2:-}" = relaxed ] && opts="-c synchronous_commit=off"
  PGOPTIONS="$opts" "$PGBIN/pgbench" -n -c "$1" -j "$1" -T "${PGBENCH_SECONDS:-8}" \
      -f "$work/insert.sql" "$db" 2>/dev/null \
    | awk '/^tps = / { printf "%.0f", $3 }'
}

# pgbench_statement_rate CLIENTS DBURL: the engine's own one-message insert
# (a message row and its delivery row, kInsertOneMessage in
# schema/store_sql.h, read from the source so the two can't drift), run by
# pgbench as the engine runs it: prepared, generic plan, strict. DBURL is a
# database the engine has run on (its schema, partitions, an interface and
# a destination). What one connection could reach if the engine added
# nothing but this statement.
pgbench_statement_rate() {
  local ids iface dest tier payload script="$work/engine-insert.sql"
  ids=$(psql "$2" -Atc "SELECT d.interface_id, d.id, (SELECT tier FROM messages LIMIT 1)
                        FROM destinations d ORDER BY d.id LIMIT 1")
  IFS='|' read -r iface dest tier <<< "$ids"
  { echo '\set pk random(0, 15)'
    # The browser's columns (migration 0006) as intake fills them for HL7:
    # a type, a control id of its own, a patient's key; no charset.
    echo '\set ctl random(1, 1000000000)'
    echo '\set kv random(1, 100000)'
    awk '/constexpr const char\* kInsertOneMessage = R"\(/ { f = 1; next } f && /^\)";/ { f = 0 } f' \
        "$here/schema/store_sql.h" \
      | sed -e 's/\$1::/:iface::/g; s/\$2::/:tier::/g; s/\$3::/:dests::/g; s/\$4::/:relaxed::/g' \
            -e 's/\$5::/:pk::/g; s/\$6::/:origin::/g; s/\$7::/:payload::/g' \
            -e 's/\$8::/:mtype::/g; s/\$9::/:ctl::/g; s/\$10::/:kv::/g; s/\$11::/NULL::/g' \
      | tr '\n' ' '
    echo ';'; } > "$script"
  grep -q "INSERT INTO deliveries" "$script" \
    || { echo "bench: kInsertOneMessage not found in schema/store_sql.h" >&2; return 1; }
  # A 175-byte ADT-sized payload (no backslash: bytea's text input reads it).
  payload="MSH|^~&|LOAD|FAC|DUCTUS|FAC|20261203||ADT^A01|$(printf 'X%.0s' $(seq 1 130))"
  local tps
  tps=$(PGOPTIONS="-c plan_cache_mode=force_generic_plan" \
    "$PGBIN/pgbench" -n -M prepared -c "$1" -j "$1" -T "${PGBENCH_SECONDS:-8}" \
      -D iface="$iface" -D tier="$tier" -D dests="{$dest}" -D relaxed=f -D origin=0 \
      -D payload="$payload" -D mtype='ADT^A01' -f "$script" "$2" 2>"$work/pgbench-statement.err" \
    | awk '/^tps = / { printf "%.0f", $3 }')
  [ -n "$tps" ] || { echo "bench: pgbench on the engine's insert failed:" >&2; tail -3 "$work/pgbench-statement.err" >&2; }
  echo "$tps"
}

# statements_reset DBURL / statements_top DBURL TITLE: with STATEMENTS=1,
# forget what pg_stat_statements and the table counters counted, then
# print the statements that took the most execution time since (calls,
# rows, time and WAL per call), and the rows each message table had
# inserted, updated (of those, in place: HOT) and deleted.
statements_reset() {
  [ -n "${STATEMENTS:-}" ] || return 0
  psql "$1" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" -c "SELECT pg_stat_reset()" >/dev/null
}
statements_top() {
  [ -n "${STATEMENTS:-}" ] || return 0
  echo
  echo "Where the database's time went: $2 (pg_stat_statements, top 10 by execution time)"
  echo
  psql "$1" -P pager=off -P footer=off -c "
    SELECT round(total_exec_time::numeric, 0) AS total_ms, calls, rows,
           round((total_exec_time / greatest(calls, 1))::numeric, 3) AS ms_per_call,
           round(wal_bytes / greatest(calls, 1)) AS wal_bytes_per_call,
           regexp_replace(left(regexp_replace(query, '\s+', ' ', 'g'), 90), '^ ', '') AS statement
      FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
     ORDER BY total_exec_time DESC LIMIT 10"
  psql "$1" -P pager=off -P footer=off -c "
    SELECT relname AS \"table\", sum(n_tup_ins) AS inserted, sum(n_tup_upd) AS updated,
           sum(n_tup_hot_upd) AS hot, sum(n_tup_del) AS deleted
      FROM pg_stat_user_tables WHERE relname ~ '^(messages|deliveries|dedupe_keys)'
     GROUP BY 1 ORDER BY 1"
}

# wait_delivered DBURL [TENTHS]: returns 0 once no delivery is pending, or
# 1 after TENTHS tenths of a second (default 1200) with some still
# pending. Every message is stored before its ACK, so after the load
# every delivery exists. One probe of the queue's partial index; counting
# the delivered rows every 0.1 s instead scanned the whole table each time
# (150,000 rows and their dead versions at 25 destinations) and took CPU
# from the engine being timed. The probes go through one psql session: a
# psql and a backend started every 0.1 s took 8 % of the samples in a
# profile of the engine's run.
wait_delivered() {
  local pending=""
  coproc PROBE { psql "$1" -Atq; }
  for _ in $(seq 1 "${2:-1200}"); do
    echo "SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE status = 0 LIMIT 1) p;" >&"${PROBE[1]}"
    read -r -t 60 pending <&"${PROBE[0]}" || pending=""
    [ "$pending" = 0 ] && break
    sleep 0.1
  done
  eval "exec ${PROBE[1]}>&-"
  wait "$PROBE_PID" 2>/dev/null || true
  [ "$pending" = 0 ]
}

# new_db NAME: a fresh database; prints its connection string.
new_db() {
  PGOPTIONS="-c client_min_messages=warning" psql "$url" -qc "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null
  echo "$url dbname=$1"
}

# engine_start PROJECT DBURL: runs the engine until engine_stop; waits
# ENGINE_START_SECONDS (20) for its started line.
engine_start() {
  "$build/ductus" run "$1" --database "$2" >"$work/engine.log" 2>&1 &
  engine_pid=$!
  for _ in $(seq 1 $(( ${ENGINE_START_SECONDS:-20} * 10 ))); do
    grep -q "started:" "$work/engine.log" && return 0
    kill -0 "$engine_pid" 2>/dev/null || { cat "$work/engine.log" >&2; return 1; }
    sleep 0.1
  done
  cat "$work/engine.log" >&2
  return 1
}

engine_stop() {
  kill -TERM "$engine_pid" 2>/dev/null || true
  wait "$engine_pid" 2>/dev/null || true
  engine_pid=""
}

# median [FORMAT]: of the numbers on stdin (FORMAT %.0f unless given).
median() {
  sort -n | awk -v f="${1:-%.0f}" '{ a[NR] = $1 } END {
    if (NR == 0) { print "n/a"; exit }
    printf f "\n", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# cpu_ticks PID: its CPU time so far (user + system, every thread), in
# clock ticks (getconf CLK_TCK a second); rss_kb PID: its resident memory.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# machine_cpu: the whole machine's CPU time so far, "busy all" in ticks
# (/proc/stat: busy is user, nice, system, irq and softirq; all adds idle,
# iowait and steal). cpu_per_message BEFORE AFTER MESSAGES RATE: from two
# of them around a run of MESSAGES at RATE, what each message cost the
# machine (core-µs: the load client, the engine, its workers and
# PostgreSQL together), the share left idle, and the rate this work per
# message would reach with every core busy (RATE ÷ busy share): "µs idle
# ceiling". The machine runs nothing but the bench, so the ceiling bounds
# what less waiting alone can win; beyond it only less work per message.
machine_cpu() { awk '/^cpu / { b = $2 + $3 + $4 + $7 + $8; print b, b + $5 + $6 + $9 }' /proc/stat; }
cpu_per_message() {
  awk -v b0="${1% *}" -v a0="${1#* }" -v b1="${2% *}" -v a1="${2#* }" -v n="$3" -v r="$4" \
      -v hz="$(getconf CLK_TCK)" 'BEGIN {
    busy = b1 - b0; all = a1 - a0
    if (busy <= 0 || all <= 0 || n <= 0) { print "n/a n/a n/a"; exit }
    printf "%.0f %.2f %.0f\n", busy / hz * 1e6 / n, 1 - busy / all, r * all / busy }'
}

# rate_of: the rate=N that mllp_load prints.
rate_of() { sed -n 's/.*rate=\([0-9]*\).*/\1/p'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
