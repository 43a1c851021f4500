#!/usr/bin/env bash
# Runs a command while busy-loop processes keep every core busy, to check that tests hold on a
# loaded machine. Every hog is stopped when the command ends, fails, or is interrupted (Ctrl-C).
# The exit status is the command's.
#
#   scripts/with-cpu-hogs.sh [-n HOGS] COMMAND [ARGS...]
#
#   -n HOGS          number of busy loops (default: RINGLET_CPU_HOGS, else one per online core)
#
# Examples:
#   scripts/with-cpu-hogs.sh ctest --test-dir build -j2 -LE gpu
#   scripts/with-cpu-hogs.sh -n 4 bash -c 'cd build && ctest -j2 --timeout 600 -LE gpu'
set -uo pipefail

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

hogs="${RINGLET_CPU_HOGS:-}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n)
      [[ $# -ge 2 ]] || usage
      hogs="$2"
      shift 2
      ;;
    -h | --help) usage ;;
    --)
      shift
      break
      ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || usage
if [[ -z "$hogs" ]]; then
  hogs="$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)"
fi
if ! [[ "$hogs" =~ ^[0-9]+$ ]]; then
  echo "with-cpu-hogs.sh: the number of hogs must be a whole number, not '$hogs'" >&2
  exit 2
fi

pids=()
stop_hogs() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap stop_hogs EXIT
trap 'stop_hogs; trap - INT; kill -INT $$' INT
trap 'stop_hogs; trap - TERM; kill -TERM $$' TERM
trap 'stop_hogs; trap - HUP; kill -HUP $$' HUP

for ((i = 0; i < hogs; i++)); do
  # Spins while this script lives: a hog left behind by a SIGKILLed script stops by itself.
  bash -c 'while kill -0 "$1" 2>/dev/null; do :; done' cpu-hog "$$" &
  pids+=("$!")
done
echo "with-cpu-hogs.sh: $hogs busy loop(s) running (pids ${pids[*]:-none})" >&2

"$@"
status=$?
stop_hogs
exit "$status"
