#!/usr/bin/env bash
# The REST API under load (issue #20): GET /health, GET /interfaces and the
# message browser, over keep-alive connections, with INTERFACES interfaces
# configured, MESSAGES messages stored, and CONNECTIONS MLLP senders
# ingesting all the while. Each row is a ratio to the limit measured in the
# same run: the same client against an HTTP server that answers a fixed 200
# at once (http_load --serve), the round trip no server here can beat.
#
#   scripts/bench-api.sh            (BUILD=build/release by default)
#   INTERFACES=1000                 configured (default 1,000)
#   MESSAGES=1000000                stored in the browsed interface (default 1,000,000)
#   CONNECTIONS=16                  MLLP senders during the API load (default 16)
#   API_CONNECTIONS=4               keep-alive API clients (default 4)
#   SECONDS_EACH=10                 per row (default 10)
#
# Targets: /health p99 < 5 ms; the browser's first page p99 < 50 ms.
#
# The messages are written with SQL (far quicker than through MLLP) into the
# browsed interface's partitions, with what intake stores for the browser
# (type, control id, key value), then vacuumed and analysed.
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start
[ -n "${BENCH_NO_BUILD:-}" ] || cmake --build "$build" --target ack_waits http_load >/dev/null
interfaces=${INTERFACES:-1000}
messages=${MESSAGES:-1000000}
conns=${CONNECTIONS:-16}
apiconns=${API_CONNECTIONS:-4}
each=${SECONDS_EACH:-10}
# Below the ephemeral ports (32768 and up), where 1,000 consecutive ports
# are not taken by connections of the moment.
base=$((10000 + RANDOM % 20000))
port=$base
apiport=$((base + interfaces + 1))
floorport=$((base + interfaces + 2))
HTTP_LOAD="$build/tests/bench/http_load"

dir="$work/p"
mkdir -p "$dir/interfaces"
printf 'api: { listen: 127.0.0.1:%s }\nisolates: { workers: 2, heap_mb: 256 }\n' "$apiport" \
  > "$dir/ductus.yaml"
for i in $(seq 0 $((interfaces - 1))); do
  name=$([ "$i" = 0 ] && echo in || printf 'if%04d' "$i")
  mkdir -p "$dir/interfaces/$name"
  printf 'source:\n  mllp: { listen: 127.0.0.1:%s }\nformat: hl7v2\nretention: 1w\nordering: { key: PID.3.1 }\ndestination:\n  file: { path: out/ }\n' \
    "$((base + i))" > "$dir/interfaces/$name/interface.yaml"
  # Filtered: this measures the API beside intake, not delivery.
  echo 'export function transform() { return null; }' > "$dir/interfaces/$name/transform.js"
done

db="$(new_db b_api)"
token=$("$build/ductus" token create bench --role viewer --database "$db" "$dir" 2>/dev/null \
          | grep -o 'dux_[0-9a-f]*')
[ -n "$token" ] || { echo "bench-api: no token made" >&2; exit 1; }
t0=$(date +%s)
ENGINE_START_SECONDS=300 engine_start "$dir" "$db"
echo "engine started with $interfaces interfaces in $(( $(date +%s) - t0 )) s"

t0=$(date +%s)
psql "$db" -q -o /dev/null -v ON_ERROR_STOP=1 <<SQL
SELECT ductus_ensure_partitions(t, 7::int2, (now() AT TIME ZONE 'UTC')::date - 2, 2, 2000)
FROM unnest(ARRAY['messages', 'deliveries']) t;
WITH m AS (
  INSERT INTO messages (tier, received_at, interface_id, payload, status, message_type,
                        control_id, key_value, partition_key)
  SELECT 7, now() - interval '1 day' + g * (interval '86000 seconds' / $messages),
         i.id,
         convert_to('MSH|^~\&|SEND|FAC|RECV|FAC|20260101120000||ADT^A01|CTRL' || g
                    || '|P|2.5' || chr(13) || 'EVN|A01|20260101120000' || chr(13)
                    || 'PID|1||MRN' || (g % 50000) || '^^^H^MR||Doe^John^Q||19700101|M'
                    || chr(13) || 'PV1|1|I|W^1^1' || chr(13), 'UTF8'),
         CASE WHEN g % 100 = 0 THEN 3 ELSE 1 END,
         CASE WHEN g % 3 = 0 THEN 'ORU^R01^ORU_R01' ELSE 'ADT^A01^ADT_A01' END,
         'CTRL' || g, 'MRN' || (g % 50000), 0
  FROM generate_series(1, $messages) g, (SELECT id FROM interfaces WHERE name = 'in') i
  RETURNING id, received_at, status)
INSERT INTO deliveries (message_id, destination_id, tier, received_at, status, attempts, updated_at)
SELECT m.id, d.id, 7, m.received_at, m.status, 1, m.received_at
FROM m, (SELECT d.id FROM destinations d JOIN interfaces i ON i.id = d.interface_id
         WHERE i.name = 'in') d;
VACUUM ANALYZE messages, deliveries;
SQL
echo "stored $messages messages in 'in' in $(( $(date +%s) - t0 )) s"

"$HTTP_LOAD" --serve "$floorport" > "$work/floor.out" &
floor_pid=$!
for _ in $(seq 1 50); do grep -q listening "$work/floor.out" 2>/dev/null && break; sleep 0.1; done

"$build/tests/bench/ack_waits" 127.0.0.1 "$port" "$conns" 3600 "$work/acks.txt" > "$work/load.out" &
load_pid=$!
sleep 2

row() {  # row LABEL TARGET PATH [PORT]
  local out
  out=$("$HTTP_LOAD" 127.0.0.1 "${4:-$apiport}" "$3" "$each" "$apiconns" "$token")
  local rate p50 p99 max errors
  rate=$(sed -n 's/.*rate=\([0-9]*\).*/\1/p' <<< "$out")
  p50=$(sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p' <<< "$out")
  p99=$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<< "$out")
  max=$(sed -n 's/.*max_ms=\([0-9.]*\).*/\1/p' <<< "$out")
  errors=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<< "$out")
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$rate" "$(ratio "$rate" "$floor_rate")" \
    "$p50" "$p99" "$max" "$errors" "$2"
}
floor_out=$("$HTTP_LOAD" 127.0.0.1 "$floorport" / "$each" "$apiconns")
floor_rate=$(sed -n 's/.*rate=\([0-9]*\).*/\1/p' <<< "$floor_out")

echo
echo "$apiconns keep-alive API clients, $each s a row, while $conns MLLP connections ingest;" \
  "$interfaces interfaces, $messages messages in 'in':"
echo
echo "| request | requests/s | ratio to the floor | p50 ms | p99 ms | longest ms | errors | target |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
printf '| floor: a fixed 200 (http_load --serve) | %s | 1.00 | %s | %s | %s | 0 | |\n' "$floor_rate" \
  "$(sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p' <<< "$floor_out")" \
  "$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<< "$floor_out")" \
  "$(sed -n 's/.*max_ms=\([0-9.]*\).*/\1/p' <<< "$floor_out")"
row "GET /health" "p99 < 5 ms" /api/v1/health
row "GET /interfaces ($interfaces)" "" /api/v1/interfaces
row "browser: first page of 50" "p99 < 50 ms" "/api/v1/interfaces/in/messages?limit=50"
row "browser: quarantined, first page" "" "/api/v1/interfaces/in/messages?status=quarantined&limit=50"
row "browser: by control id" "" "/api/v1/interfaces/in/messages?control_id=CTRL$((messages / 2))"
row "browser: by key value" "" "/api/v1/interfaces/in/messages?key=MRN4242&limit=50"
row "browser: by type, first page" "" "/api/v1/interfaces/in/messages?type=ORU%5ER01&limit=50"

touch "$work/acks.txt.stop"
wait "$load_pid"
kill "$floor_pid" 2>/dev/null || true
acks=$(wc -l < "$work/acks.txt")
echo
echo "MLLP during the API rows: $acks ACKs ($(awk '$3 != "AA"' "$work/acks.txt" | wc -l) not AA)."
engine_stop
