#!/usr/bin/env bash
# The message store's figures, each next to a limit measured in the same run
# on the same throwaway cluster (fsync on):
#   - the queue read (50 rows for one destination and a set of lanes) with
#     1,000 and 500,000 waiting, and with 1,000,000 delivered rows ahead of
#     the backlog; target: 500k within 2x of 1k (the queue index makes a
#     read stop after 50 rows, so its cost must not grow with the backlog);
#   - the durable insert rate (a message + its delivery + its dedupe key, one
#     commit each) at 1 and 16 connections, next to pgbench's single-row
#     durable INSERT at the same client counts; target: 16 connections
#     >= 0.8 x pgbench.
#
#   scripts/bench-store.sh            (BUILD_DIR=build/release by default)
#   SECONDS_PER_RUN=8 BUILD_DIR=build/mine scripts/bench-store.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build/release}"
SECONDS_PER_RUN="${SECONDS_PER_RUN:-8}"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
PSQL="$PGBIN/psql"
PGBENCH="$PGBIN/pgbench"
[ -x "$PGBENCH" ] || { echo "bench-store: no pgbench at $PGBENCH" >&2; exit 1; }

cmake --build "$BUILD_DIR" --target bench_store >/dev/null
BENCH="$BUILD_DIR/tests/bench/bench_store"

dir="$(mktemp -d /tmp/bench-store.XXXXXX)"
url="$("$ROOT/scripts/pg.sh" start "$dir")"
trap '"$ROOT/scripts/pg.sh" stop "$dir"' EXIT
db() { echo "$url" | sed "s/dbname=[^ ]*/dbname=$1/"; }
# psql and pgbench run as the cluster's owner where we are root.
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

for name in bench_pgbench bench_insert_1 bench_insert_16 bench_queue; do
  as_pg "$PSQL" -qX "$url" -c "CREATE DATABASE $name" >/dev/null
done
as_pg "$PSQL" -qX "$(db bench_pgbench)" \
  -c "CREATE TABLE rows (id bigserial PRIMARY KEY, payload text NOT NULL)" >/dev/null
script="$dir/insert.sql"
echo "INSERT INTO rows (payload) VALUES (repeat('x', 200));" > "$script"
chmod 644 "$script"

pgbench_tps() {  # clients
  as_pg "$PGBENCH" -n -f "$script" -c "$1" -j "$(( $1 < 2 ? 1 : 2 ))" -T "$SECONDS_PER_RUN" \
    "$(db bench_pgbench)" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1
}
value() { sed -n "s/^$1 //p"; }

echo "measuring inserts (${SECONDS_PER_RUN}s each)..." >&2
pg1="$(pgbench_tps 1)"
st1="$("$BENCH" insert "$(db bench_insert_1)" 1 "$SECONDS_PER_RUN" | value insert_1_per_s)"
pg16="$(pgbench_tps 16)"
st16="$("$BENCH" insert "$(db bench_insert_16)" 16 "$SECONDS_PER_RUN" | value insert_16_per_s)"

echo "filling 1,501,000 messages and measuring queue reads..." >&2
queue="$("$BENCH" queue "$(db bench_queue)")"
r1k="$(echo "$queue" | value read_1k_ms)"
r500k="$(echo "$queue" | value read_500k_ms)"
r1m="$(echo "$queue" | value read_1m_delivered_ms)"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '\n%-52s %12s %12s %8s\n' "figure" "measured" "limit" "ratio"
printf '%-52s %12s %12s %8s\n' "insert, 1 connection (msg+delivery+dedupe /s)" "$st1" \
  "$pg1" "$(ratio "$st1" "$pg1")"
printf '%-52s %12s %12s %8s\n' "insert, 16 connections (/s; target ratio >= 0.8)" "$st16" \
  "$pg16" "$(ratio "$st16" "$pg16")"
printf '%-52s %12s %12s %8s\n' "queue read, 500,000 waiting (ms; target <= 2)" "$r500k" \
  "$r1k" "$(ratio "$r500k" "$r1k")"
printf '%-52s %12s %12s %8s\n' "queue read, 1,000,000 delivered ahead (ms)" "$r1m" \
  "$r1k" "$(ratio "$r1m" "$r1k")"
echo "(limits: pgbench single-row durable INSERT at the same client count; the queue read with 1,000 waiting)"
