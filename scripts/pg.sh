#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for dev and tests.
#
#   scripts/pg.sh start [DIR] [--tcp PORT]   start (initdb first if DIR is new);
#                                            prints the connection string
#   scripts/pg.sh url DIR                    print the connection string
#   scripts/pg.sh stop DIR [--keep]          stop it and remove DIR (--keep: only stop)
#   scripts/pg.sh status DIR
#   scripts/pg.sh crash DIR immediate|kill   end it as a crash would, keeping DIR:
#                                            immediate: pg_ctl -m immediate (no
#                                            checkpoint, no WAL flush); kill: kill -9
#                                            of the postmaster and every backend
#   scripts/pg.sh standby DIR PRIMARY_DIR NAME [--tcp PORT]
#                                            a streaming standby of the cluster
#                                            running in PRIMARY_DIR (pg_basebackup
#                                            -R -X stream over its socket), whose
#                                            walreceiver calls itself NAME (for
#                                            synchronous_standby_names); started
#                                            as `start` does; prints its string
#   scripts/pg.sh promote DIR                the standby in DIR becomes a primary
#                                            (pg_ctl promote, waits for it)
#
# PG_EXTRA_OPTIONS: more server settings for `start`, as postgres -c ...
# (e.g. "-c shared_preload_libraries=pg_stat_statements" for a benchmark).
#
# The cluster runs as the postgres OS user (initdb refuses root), keeps its
# data in DIR/data, listens only on a Unix socket in DIR (no TCP port unless
# --tcp), and has fsync on: the durability figures we measure are real.
set -euo pipefail

PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
PORT=5432  # only names the socket file inside DIR; no TCP unless --tcp

die() { echo "pg.sh: $*" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

url_of() { echo "host=$1 port=$PORT user=postgres dbname=postgres"; }

cmd="${1:-}"; shift || true
case "$cmd" in
  start)
    dir=""; tcp=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --tcp) tcp="$2"; shift 2 ;;
        *) dir="$1"; shift ;;
      esac
    done
    [ -x "$PGBIN/initdb" ] || die "no PostgreSQL 15 at $PGBIN: run scripts/install-deps.sh as root"
    if [ -z "$dir" ]; then dir="$(mktemp -d /tmp/ductus-pg.XXXXXX)"; fi
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ ${#dir} -lt 90 ] || die "$dir is too long for a Unix socket path; use a shorter folder"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; chmod 700 "$dir"; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      as_owner "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; die "initdb failed in $dir"; }
    fi
    listen="''"
    [ -n "$tcp" ] && listen="'127.0.0.1'" && PORT="$tcp"
    if ! as_owner "$PGBIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start \
        -o "-c listen_addresses=$listen -c port=$PORT -c unix_socket_directories='$dir' -c fsync=on -c max_connections=300 -c shared_buffers=256MB -c max_locks_per_transaction=256 ${PG_EXTRA_OPTIONS:-}" >/dev/null \
        || { tail -20 "$dir/postgres.log" >&2; die "postgres did not start in $dir"; }
    fi
    echo "$PORT" > "$dir/port"
    url_of "$dir"
    ;;
  url)
    dir="${1:?usage: pg.sh url DIR}"
    [ -f "$dir/port" ] && PORT="$(cat "$dir/port")"
    url_of "$(cd "$dir" && pwd)"
    ;;
  status)
    dir="${1:?usage: pg.sh status DIR}"
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" status
    ;;
  stop)
    dir="${1:?usage: pg.sh stop DIR [--keep]}"; keep="${2:-}"
    if [ -d "$dir/data" ]; then
      as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
    fi
    [ "$keep" = "--keep" ] || rm -rf "$dir"
    ;;
  standby)
    usage="usage: pg.sh standby DIR PRIMARY_DIR NAME [--tcp PORT]"
    args=(); tcp=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --tcp) tcp="$2"; shift 2 ;;
        *) args+=("$1"); shift ;;
      esac
    done
    [ ${#args[@]} -eq 3 ] || die "$usage"
    dir="${args[0]}"; primary="$(cd "${args[1]}" && pwd)"; name="${args[2]}"
    pport=5432
    [ -f "$primary/port" ] && pport="$(cat "$primary/port")"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; chmod 700 "$dir"; fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      # -R writes standby.signal and primary_conninfo (this string, with
      # application_name) into the copy.
      as_owner "$PGBIN/pg_basebackup" -D "$dir/data" -R -X stream -c fast \
        -d "host=$primary port=$pport user=postgres application_name=$name" >"$dir/basebackup.log" 2>&1 \
        || { cat "$dir/basebackup.log" >&2; die "pg_basebackup of $primary failed"; }
    fi
    exec "$0" start "$dir" ${tcp:+--tcp "$tcp"}
    ;;
  promote)
    dir="${1:?usage: pg.sh promote DIR}"
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
    ;;
  crash)
    dir="${1:?usage: pg.sh crash DIR immediate|kill}"; how="${2:?usage: pg.sh crash DIR immediate|kill}"
    case "$how" in
      immediate)
        as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null
        ;;
      kill)
        pid="$(head -1 "$dir/data/postmaster.pid")"
        # Its children first named, then all killed at once: once the
        # postmaster is gone they are no longer its children to find.
        procs="$pid $(pgrep -P "$pid" | tr '\n' ' ')"
        kill -9 $procs 2>/dev/null || true
        for _ in $(seq 1 100); do
          alive=0
          for p in $procs; do kill -0 "$p" 2>/dev/null && alive=1; done
          [ $alive -eq 0 ] && break
          sleep 0.1
        done
        ;;
      *) die "crash: immediate or kill, not '$how'" ;;
    esac
    ;;
  *)
    sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$cmd" ] && exit 2
    [ "$cmd" = "--help" ] || [ "$cmd" = "-h" ] || exit 2
    ;;
esac
