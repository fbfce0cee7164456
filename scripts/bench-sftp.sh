#!/usr/bin/env bash
# SFTP destination: files per second through the engine's SftpSender (one
# session kept open, each file written to a temporary name, flushed and
# renamed) beside OpenSSH's own client putting the same files on the same
# server, in one run:
#
#   a. `sftp -b` with one session for every file: plain puts, no rename or
#      flush, the client OpenSSH ships. The limit.
#   b. `sftp -b` once per file: a new session (TCP, key exchange, sign-in)
#      for each, as a script calling sftp per file does. The goal: the
#      sender >= 1.0 times this.
#
# The server is a throwaway /usr/sbin/sshd on 127.0.0.1 (its own host key,
# the caller's user signed in with a key made here, internal-sftp). FILES
# HL7 messages of about 1 KB each, distinct control ids, are made once and
# put by all three; each into its own empty folder. The three run in turns
# within a round (the order rotated every round): this machine's speed
# drifts, so only figures taken side by side are compared. A row shows the
# medians, and the sender's ratio to each, the median of the rounds' own
# ratios. Nothing here asserts a time.
#
#   scripts/bench-sftp.sh           (BUILD=build/release by default)
#   FILES=2000                      messages per figure (default 2000)
#   ROUNDS=3                        rounds (default 3)
#   PER_FILE_FILES=200              files for b. (default 200, at most FILES):
#                                   a session each costs ~0.2 s; its rate is
#                                   per file whatever the count
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD:-$here/build/release}"
[ -n "${BENCH_NO_BUILD:-}" ] || cmake --build "$build" --target sftp_load >/dev/null
files=${FILES:-2000}
rounds=${ROUNDS:-3}
per_file_files=${PER_FILE_FILES:-200}
(( per_file_files <= files )) || per_file_files=$files
work="$(mktemp -d /tmp/ductus-bench-sftp.XXXXXX)"
sshd_pid=""
trap '[ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null; rm -rf "$work"' EXIT

# The server: its host key, the user's key, a config of its own.
port=$((20000 + RANDOM % 20000))
user="$(id -un)"
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/user_key"
cp "$work/user_key.pub" "$work/authorized_keys"
chmod 700 "$work"
cat > "$work/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $work/host_key
PidFile $work/sshd.pid
AuthorizedKeysFile $work/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
MaxStartups 100:30:200
MaxSessions 100
Subsystem sftp internal-sftp
CONF
mkdir -p /run/sshd
/usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
sshd_pid=$!
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
host_key="$(cut -d' ' -f1,2 "$work/host_key.pub")"
echo "[127.0.0.1]:$port $host_key" > "$work/known_hosts"
sftp_opts=(-q -i "$work/user_key" -P "$port" -o "UserKnownHostsFile=$work/known_hosts"
           -o StrictHostKeyChecking=yes -o BatchMode=yes)

# FILES messages of about 1 KB: an ADT^A01 with its own control id, padded
# by OBX segments.
mkdir -p "$work/msgs"
obx="$(for i in 1 2 3 4 5 6 7 8; do printf 'OBX|%d|TX|NOTE^Note||%s\r' "$i" "$(printf 'x%.0s' $(seq 1 90))"; done)"
for i in $(seq 1 "$files"); do
  printf 'MSH|^~\\&|LAB|HOSP|DUCTUS|HOSP|20261205120000||ADT^A01|MSG%06d|P|2.5\rPID|1||%06d^^^HOSP||DOE^JANE||19700101|F\r%s' \
    "$i" "$i" "$obx" > "$work/msgs/m$(printf '%06d' "$i").hl7"
done
size=$(( $(cat "$work"/msgs/* | wc -c) / files ))

now() { date +%s.%N; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.0f", n / (b - a) }'; }
# A new folder each call, nothing deleted until the end: on ext4 without a
# journal a file made soon after many were deleted costs a scan of them
# (keep_files in bench-lib.sh).
fresh() { mkdir -p "$work/remote"; mktemp -d "$work/remote/$1.XXXXXX"; }
count() { find "$1" -type f | wc -l; }

sender() {  # the engine's SftpSender: FILES files over one kept session
  local dir out
  dir="$(fresh sender)"
  out="$("$build/tests/bench/sftp_load" "$work/msgs" 127.0.0.1 "$port" "$user" "$work/user_key" \
    "$host_key" "$dir")"
  [ "$(count "$dir")" -eq "$files" ] || { echo "bench: the sender left $(count "$dir") files" >&2; exit 1; }
  sed -n 's/.*rate=\([0-9]*\).*/\1/p' <<< "$out"
}

one_session() {  # sftp -b: FILES puts in one session
  local dir t0 t1
  dir="$(fresh one)"
  ( cd "$work/msgs" && for f in *; do echo "put $f $dir/$f"; done ) > "$work/batch"
  t0=$(now)
  ( cd "$work/msgs" && sftp "${sftp_opts[@]}" -b "$work/batch" "$user@127.0.0.1" >/dev/null )
  t1=$(now)
  [ "$(count "$dir")" -eq "$files" ] || { echo "bench: sftp -b left $(count "$dir") files" >&2; exit 1; }
  rate "$files" "$t0" "$t1"
}

per_file() {  # sftp -b once per file: a session each
  local dir t0 t1 f
  dir="$(fresh per)"
  t0=$(now)
  for f in $(cd "$work/msgs" && ls | head -n "$per_file_files"); do
    echo "put $work/msgs/$f $dir/$f" | sftp "${sftp_opts[@]}" -b - "$user@127.0.0.1" >/dev/null
  done
  t1=$(now)
  [ "$(count "$dir")" -eq "$per_file_files" ] || { echo "bench: per-file sftp left $(count "$dir")" >&2; exit 1; }
  rate "$per_file_files" "$t0" "$t1"
}

median() {
  sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) { print "n/a"; exit }
    printf "%.2f\n", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

declare -A got
r_one="" r_per=""
for r in $(seq 1 "$rounds"); do
  case $(( r % 3 )) in
    1) order="sender one_session per_file" ;;
    2) order="one_session per_file sender" ;;
    0) order="per_file sender one_session" ;;
  esac
  for who in $order; do got[$who-$r]=$($who); done
  r_one+="$(ratio "${got[sender-$r]}" "${got[one_session-$r]}") "
  r_per+="$(ratio "${got[sender-$r]}" "${got[per_file-$r]}") "
done

med() { for r in $(seq 1 "$rounds"); do echo "${got[$1-$r]}"; done | median | awk '{ printf "%.0f", $1 }'; }
echo
echo "SFTP destination, $files files of ~$size bytes to sshd on 127.0.0.1 ($rounds rounds, medians)"
printf '%-44s %10s %8s  %s\n' "" "files/s" "sender/x" "rounds' ratios"
printf '%-44s %10s %8s\n' "SftpSender (one kept session, temp + rename)" "$(med sender)" ""
printf '%-44s %10s %8s  %s\n' "a. sftp -b, one session for all (the limit)" "$(med one_session)" \
  "$(tr ' ' '\n' <<< "$r_one" | grep . | median)" "$r_one"
printf '%-44s %10s %8s  %s\n' "b. sftp -b, a session per file ($per_file_files)" "$(med per_file)" \
  "$(tr ' ' '\n' <<< "$r_per" | grep . | median)" "$r_per"
echo "goal: sender/b >= 1.0"
