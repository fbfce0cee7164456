#!/usr/bin/env bash
# Runs a command at a lower CPU priority, in the session it is started in:
#
#   setsid scripts/low-priority.sh NICE COMMAND [ARG...]
#
# scripts/test and .ci/run start builds beside the tests this way. With
# autogroup scheduling on (Debian's kernels: /proc/sys/kernel/
# sched_autogroup_enabled), a new session is a scheduling group of its own
# that shares the CPU equally with every other group, whatever the nice
# value of the processes in it: a build in its own session at nice 19
# took a third of the two cores from the build and tests beside it. So
# the group's own nice value is set too (/proc/self/autogroup), and the
# processes' for kernels without autogroup.
set -euo pipefail
nice_value="$1"
shift
echo "$nice_value" 2>/dev/null >/proc/self/autogroup || true
exec nice -n "$nice_value" "$@"
