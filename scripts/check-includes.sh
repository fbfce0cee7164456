#!/usr/bin/env bash
# Checks the include rule of every folder (docs/architecture.md, "Folders"):
# a file may include, of our own headers, only those of the folders its own
# folder may reach. Run by ctest (include_rules); prints each violation as
# file:line and exits 1 if there is any.
#
#   scripts/check-includes.sh [ROOT]     ROOT defaults to this checkout
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$root"

# folder (longest prefix wins) -> the folders of ours it may include
declare -A allowed=(
  [common]="common"
  [common/config]="common"
  [common/net]="common"
  [common/tls]="common"
  [common/monitor]="common"
  [common/sftp]="common"
  [proto]="proto common"
  [schema]="schema common"
  [worker]="worker common proto"
  [intake]="intake common schema"
  [supervisor/delivery]="supervisor/delivery common schema intake"
  [supervisor]="supervisor common proto schema worker intake api ctl"
  [api]="api common schema"
  [ctl]="ctl common"
)
# folder -> folders inside an allowed one it still may not include: the
# config model and the network core are both common/, and neither may
# reach the other (net/ is handed its limits; config/ knows no sockets).
# tls/ and sftp/ are read by both (their settings.h is the shape config/
# fills) and reach neither.
declare -A denied=(
  [common/config]="common/net"
  [common/net]="common/config"
  [common/tls]="common/config common/net"
  [common/monitor]="common/config common/net common/tls"
  [common/sftp]="common/config common/net common/tls common/monitor"
)
ours="common|proto|schema|worker|intake|supervisor|api|ctl"

ruleOf() {  # the rule's key for a file
  local f="$1"
  case "$f" in
    supervisor/delivery/*) echo supervisor/delivery ;;
    common/config/*) echo common/config ;;
    common/net/*) echo common/net ;;
    common/tls/*) echo common/tls ;;
    common/monitor/*) echo common/monitor ;;
    common/sftp/*) echo common/sftp ;;
    *) echo "${f%%/*}" ;;
  esac
}

bad=0
checked=0
while IFS= read -r file; do
  key="$(ruleOf "$file")"
  [ -n "${allowed[$key]+x}" ] || continue
  checked=$((checked + 1))
  while IFS=: read -r line inc; do
    target="${inc#*\"}"
    target="${target%%\"*}"
    case "$target" in */*) ;; *) continue ;; esac
    top="${target%%/*}"
    [[ "$top" =~ ^($ours)$ ]] || continue
    ok=0
    for a in ${allowed[$key]}; do
      case "$target" in "$a"/*) ok=1 ;; esac
    done
    if [ $ok -eq 0 ]; then
      echo "$file:$line: includes \"$target\", but $key/ may include only: ${allowed[$key]}" >&2
      bad=1
      continue
    fi
    for d in ${denied[$key]:-}; do
      case "$target" in
        "$d"/*)
          echo "$file:$line: includes \"$target\", but $key/ may not include $d/" >&2
          bad=1
          ;;
      esac
    done
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(find common proto schema worker intake supervisor api ctl -type f \( -name '*.h' -o -name '*.cpp' \) 2>/dev/null | sort)

if [ $checked -eq 0 ]; then
  echo "check-includes: no source files under $root" >&2
  exit 1
fi
if [ $bad -ne 0 ]; then
  echo "check-includes: include rules broken (docs/architecture.md, \"Folders\")" >&2
  exit 1
fi
echo "check-includes: $checked files keep their folder's include rule"
