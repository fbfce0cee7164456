#!/usr/bin/env bash
# TLS: what it costs the engine's listeners, beside OpenSSL's own server on
# the same machine, in one run.
#
#   a. Full handshakes (no resumption, `openssl s_time -new`) against
#      `openssl s_server` and against an engine's TLS MLLP listener, each
#      pinned to CPU 0 with the clients on CPU 1, TLS 1.3 and TLS 1.2. Two
#      figures: handshakes per second of the clock, and per second of the
#      server's own CPU time (its utime + stime over the run, all threads):
#      what one core of it does. On a machine of two cores the clients'
#      core is the limit of the first (a client's half of a handshake costs
#      more than the server's: it verifies a signature), so the ratio that
#      says how the engine's TLS compares is the second's (goal >= 0.8).
#   b. Strict MLLP at 16 connections (mllp_load, each message waiting for
#      its ACK): the same engine project without and with tls: on its
#      source, each on a fresh database; ACKs/s and the ratio (goal >= 0.9).
#      Beside it the same load against mllp_load's echo server in clear and
#      over TLS: what TLS adds to a hop that stores nothing.
#
# Within a round the two sides of a comparison run back to back, in turns
# (the order swapped every other round): this machine's speed drifts, so
# only figures taken minutes apart would otherwise be compared. A row shows
# the medians, the median of the rounds' own ratios, and each round's ratio.
# Same key on both sides: one P-256 certificate made here with the openssl
# CLI. Nothing here asserts a time.
#
#   scripts/bench-tls.sh            (BUILD=build/release by default)
#   ROUNDS=3                        rounds per figure (default 3)
#   STIME_SECONDS=4                 each s_time run (default 4)
#   STIME_CLIENTS=2                 s_time processes at once (default 2)
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
bench_start
ssl_pid="" echo_pid=""
trap '[ -n "$ssl_pid" ] && kill "$ssl_pid" 2>/dev/null; [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; bench_stop' EXIT
rounds=${ROUNDS:-3}
stime_seconds=${STIME_SECONDS:-4}
stime_clients=${STIME_CLIENTS:-2}
port=$((20000 + RANDOM % 20000))
sport=$((port + 1))

tls="$work/tls"
mkdir -p "$tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 \
  -keyout "$tls/server.key" -out "$tls/server.pem" -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2>/dev/null

project() {  # project DIR TLS(yes|no): one strict MLLP interface, filtered
  local extra=""
  [ "$2" = yes ] && extra=", tls: { certificate: server }"
  mkdir -p "$1/interfaces/in"
  printf 'api: { listen: off }\nisolates: { workers: 1, heap_mb: 256 }\n' > "$1/ductus.yaml"
  printf 'certificates:\n  server: { cert_file: %s, key_file: %s }\n' \
    "$tls/server.pem" "$tls/server.key" > "$1/resources.yaml"
  printf 'source:\n  mllp: { listen: 127.0.0.1:%s%s }\nformat: hl7v2\ndurability: strict\ndestination:\n  file: { path: out/ }\n' \
    "$port" "$extra" > "$1/interfaces/in/interface.yaml"
  echo 'export function transform() { return null; }' > "$1/interfaces/in/transform.js"
}
project "$work/p-plain" no
project "$work/p-tls" yes

wait_port() {  # wait_port PORT: until something accepts there (10 s)
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "bench: nothing listens on $1" >&2
  return 1
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# handshakes PID PORT [-tls1_2]: STIME_CLIENTS `s_time -new` on CPU 1
# against PID on PORT; prints "<per clock second> <per CPU second of PID>".
handshakes() {
  local pid=$1 p=$2 c0 c1 t0 t1 n i pids=()
  shift 2
  c0=$(cpu_ticks "$pid"); t0=$(date +%s.%N)
  for i in $(seq 1 "$stime_clients"); do
    taskset -c 1 openssl s_time -connect "127.0.0.1:$p" -new -time "$stime_seconds" "$@" \
      > "$work/stime.$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  t1=$(date +%s.%N); c1=$(cpu_ticks "$pid")
  n=$(cat "$work"/stime.* | awk '/connections in .* real seconds/ { n += $1 } END { print n + 0 }')
  [ "$n" -gt 0 ] || { echo "bench: s_time made no connection to $p:" >&2; tail -3 "$work/stime.1" >&2; }
  rm -f "$work"/stime.*
  awk -v n="$n" -v a="$t0" -v b="$t1" -v c="$(( c1 - c0 ))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.0f %.0f\n", n / (b - a), (c > 0) ? n / (c / hz) : 0 }'
}

declare -A wall cpu
for r in $(seq 1 "$rounds"); do
  # OpenSSL's own server: its defaults, this pair, on CPU 0.
  taskset -c 0 openssl s_server -accept "$sport" -cert "$tls/server.pem" -key "$tls/server.key" \
    -quiet > /dev/null 2>&1 < /dev/null &
  ssl_pid=$!
  # The engine: the TLS project, every thread of the supervisor (where the
  # listener and its handshakes run) on CPU 0.
  engine_start "$work/p-tls" "$(new_db "b_hs_$r")"
  taskset -a -p -c 0 "$engine_pid" > /dev/null
  wait_port "$sport"
  for v in 1.3 1.2; do
    opt=-tls1_3
    [ "$v" = 1.2 ] && opt=-tls1_2
    order="openssl engine"
    (( r % 2 == 0 )) && order="engine openssl"
    for who in $order; do
      if [ "$who" = openssl ]; then read -r w c < <(handshakes "$ssl_pid" "$sport" "$opt")
      else read -r w c < <(handshakes "$engine_pid" "$port" "$opt"); fi
      wall[$who-$v]+=" $w" cpu[$who-$v]+=" $c"
    done
  done
  engine_stop
  kill "$ssl_pid"; wait "$ssl_pid" 2>/dev/null || true
  ssl_pid=""
done

# MLLP at 16 connections: plain and TLS engines in turns; then the echo
# server in clear and over TLS.
declare -A acks
for r in $(seq 1 "$rounds"); do
  order="plain tls"
  (( r % 2 == 0 )) && order="tls plain"
  for kind in $order; do
    engine_start "$work/p-$kind" "$(new_db "b_mllp_${kind}_$r")"
    opts=()
    [ "$kind" = tls ] && opts=(--tls "$tls/server.pem")
    acks[$kind]+=" $("$LOAD" 127.0.0.1 "$port" 16 32000 "${opts[@]}" | rate_of)"
    engine_stop
  done
  for kind in $order; do
    opts=()
    [ "$kind" = tls ] && opts=(--tls "$tls/server.pem" "$tls/server.key")
    "$LOAD" --echo "$sport" "${opts[@]}" > "$work/echo.out" &
    echo_pid=$!
    until grep -qs listening "$work/echo.out"; do sleep 0.05; done
    opts=()
    [ "$kind" = tls ] && opts=(--tls "$tls/server.pem")
    acks[echo-$kind]+=" $("$LOAD" 127.0.0.1 "$sport" 16 100000 "${opts[@]}" | rate_of)"
    kill "$echo_pid"; wait "$echo_pid" 2>/dev/null || true
    echo_pid=""
    rm -f "$work/echo.out"
  done
done

rows=()
# row LABEL "RATES" "LIMITS": median rate, median limit, the median of the
# rounds' ratios and each round's.
row() {
  local rates=($2) limits=($3) ratios=() i
  for i in "${!rates[@]}"; do ratios+=("$(ratio "${rates[$i]}" "${limits[$i]}")"); done
  rows+=("| $1 | $(printf '%s\n' "${rates[@]}" | median) | $(printf '%s\n' "${limits[@]}" | median) \
| $(printf '%s\n' "${ratios[@]}" | median %.2f) | ${ratios[*]} |")
}
for v in 1.3 1.2; do
  row "TLS $v full handshakes per CPU second of the server (one core; goal >= 0.8)" \
    "${cpu[engine-$v]}" "${cpu[openssl-$v]}"
  row "TLS $v full handshakes per second ($stime_clients s_time on the other core)" \
    "${wall[engine-$v]}" "${wall[openssl-$v]}"
done
row "strict MLLP ACKs/s, 16 connections: with tls: / without (goal >= 0.9)" "${acks[tls]}" "${acks[plain]}"
row "echo server (stores nothing) ACKs/s, 16 connections: TLS / clear" "${acks[echo-tls]}" "${acks[echo-plain]}"

echo
echo "$rounds rounds; in each, the two sides of a row measured back to back, in turns."
echo "Handshakes: server on CPU 0, s_time on CPU 1, one P-256 certificate for both;"
echo "openssl s_server with its defaults. OpenSSL $(openssl version | awk '{ print $2 }')."
echo
echo "| what | the engine, or the row's TLS side (median) | beside it: OpenSSL's s_server, or the row's clear side (median) | ratio (median of the rounds') | each round's ratio |"
echo "| --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
