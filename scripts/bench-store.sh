#!/usr/bin/env bash
# The message store's figures, each next to a limit measured in the same run
# on the same throwaway cluster (fsync on):
#   - the queue read (50 rows for one destination and a set of lanes) with
#     1,000 and 500,000 waiting, and with 1,000,000 delivered rows ahead of
#     the backlog, on a vacuumed table; target: 500k within 2x of 1k (the
#     queue index makes a read stop after 50 rows, so its cost must not grow
#     with the backlog);
#   - the same read where the delivery loop leaves it: 100,000 of the
#     500,000 delivered and settled as the loop does (read 50, flush,
#     settle), with no VACUUM since. Every delivery marked sent leaves a dead
#     entry at the front of the queue index that each read walks until a
#     vacuum; autovacuum waits for 20% of the table to change, so between
#     its runs this is the read a draining backlog gets, not the vacuumed one.
#     Printed: the median of the loop's own reads while it drained, and of
#     200 reads right after;
#   - the durable insert rate (a message + its delivery + its dedupe key, one
#     commit each) at 1 and 16 connections, next to pgbench's single-row
#     durable INSERT at the same client counts; target: 16 connections
#     >= 0.8 x pgbench.
#
#   scripts/bench-store.sh            (BUILD_DIR=build/release by default)
#   SECONDS_PER_RUN=8 BUILD_DIR=build/mine scripts/bench-store.sh
#   QUEUE_WAITING=500000 QUEUE_AHEAD=1000000 QUEUE_DRAINED=100000 (defaults)
#   BENCH_NO_BUILD=1                  measure bench_store as it is
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build/release}"
SECONDS_PER_RUN="${SECONDS_PER_RUN:-8}"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
PSQL="$PGBIN/psql"
PGBENCH="$PGBIN/pgbench"
[ -x "$PGBENCH" ] || { echo "bench-store: no pgbench at $PGBENCH" >&2; exit 1; }

[ -n "${BENCH_NO_BUILD:-}" ] || cmake --build "$BUILD_DIR" --target bench_store >/dev/null
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
    "$(db bench_pgbench)" 2>/dev/null | awk '/^tps = / { printf "%.0f", $3; exit }'
}
value() { sed -n "s/^$1 //p"; }

echo "measuring inserts (${SECONDS_PER_RUN}s each)..." >&2
pg1="$(pgbench_tps 1)"
st1="$("$BENCH" insert "$(db bench_insert_1)" 1 "$SECONDS_PER_RUN" | value insert_1_per_s)"
pg16="$(pgbench_tps 16)"
st16="$("$BENCH" insert "$(db bench_insert_16)" 16 "$SECONDS_PER_RUN" | value insert_16_per_s)"

waiting_n=${QUEUE_WAITING:-500000}
ahead_n=${QUEUE_AHEAD:-1000000}
drained_n=${QUEUE_DRAINED:-100000}
num() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
echo "filling $(num $((waiting_n + ahead_n + 1000))) messages, measuring queue reads," \
  "delivering $(num "$drained_n")..." >&2
queue="$("$BENCH" queue "$(db bench_queue)" "$waiting_n" "$ahead_n" "$drained_n")"
r1k="$(echo "$queue" | value read_1k_ms)"
rback="$(echo "$queue" | value read_backlog_ms)"
rahead="$(echo "$queue" | value read_ahead_delivered_ms)"
rdraining="$(echo "$queue" | value read_draining_ms)"
rdrained="$(echo "$queue" | value read_drained_ms)"
read -r dead autovacuumed <<< "$(echo "$queue" | value dead_deliveries_autovacuumed)"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
line() { printf '%-66s %12s %12s %8s\n' "$1" "$2" "$3" "$(ratio "$2" "$3")"; }
printf '\n%-66s %12s %12s %8s\n' "figure" "measured" "limit" "ratio"
line "insert, 1 connection (msg+delivery+dedupe /s)" "$st1" "$pg1"
line "insert, 16 connections (/s; target ratio >= 0.8)" "$st16" "$pg16"
line "queue read, $(num "$waiting_n") waiting, vacuumed (ms; target <= 2)" "$rback" "$r1k"
line "queue read, $(num "$ahead_n") delivered ahead, vacuumed (ms)" "$rahead" "$r1k"
line "queue read while delivering $(num "$drained_n") of them, no VACUUM (ms)" "$rdraining" "$r1k"
line "queue read after $(num "$drained_n") delivered, no VACUUM (ms)" "$rdrained" "$r1k"
echo "(limits: pgbench single-row durable INSERT at the same client count; the queue read"
echo "with 1,000 waiting on a vacuumed table. After the drain the statistics counted"
echo "$(num "$dead") dead deliveries rows (page pruning takes some; their index entries stay"
echo "until a vacuum), and autovacuum had vacuumed $autovacuumed partition(s) since the VACUUM.)"
