#!/usr/bin/env bash
# All-reduce busbw at one size across 2, 3 and 4 emulated hosts (scripts/emulated-hosts.sh) on
# rate-limited links, with 1 and 2 ranks per host (block and cyclic order), beside what one TCP
# stream between two of the same hosts moves in the same run. Needs root.
#
#   scripts/multi-host-bench.sh [BUILD_DIR] [OUT_DIR]
#
# Environment: RATE (tbf rate of every link end, default 1gbit), BYTES (default 16M), ITERS
# (timed all-reduce calls, default 5), ALGOS (default "auto ring": the cost model's choice, and the
# ring forced). Writes OUT_DIR/multi-host-allreduce.{json,md,png}
# (default bench/results/); matplotlib for the PNG comes from install-deps.sh --plots.
set -euo pipefail
build="${1:-$(dirname "$0")/../build}"
out="${2:-$(dirname "$0")/../bench/results}"
rate="${RATE:-1gbit}"
bytes="${BYTES:-16M}"
iters="${ITERS:-5}"
algos="${ALGOS:-auto ring}"
source "$(dirname "$0")/multi-host-common.sh"
"$here/install-deps.sh" --plots
export BYTES="$bytes" ITERS="$iters"

# One TCP stream, host 0 -> host 1: what one link moves (the reference).
echo "one TCP stream at $rate ..." >&2
stream=$(python_streams stream 1 --rate "$rate")
echo "  $stream GB/s" >&2

runs=()
for algo in $algos; do
  for hosts in 2 3 4; do
    for layout in "1 block" "2 block" "2 cyclic"; do
      read -r ranks order <<<"$layout"
      name="h${hosts}r${ranks}${order}-$algo"
      echo "all-reduce $bytes ($algo): $hosts hosts x $ranks ranks ($order) ..." >&2
      RANKS=$ranks ORDER=$order NAME=$name ALGO=$algo "$emulate" --hosts "$hosts" \
        --rate "$rate" --timeout 120 -- '"$BIN/ringlet-run" --nnodes "$EMU_HOSTS" \
          --node-rank "$EMU_NODE" --master-addr "$EMU_MASTER_ADDR" -n "$RANKS" \
          --rank-order "$ORDER" "$BIN/ringlet-bench" --ops allreduce -b "$BYTES" -e "$BYTES" \
          -n "$ITERS" -w 2 --algo "$ALGO" --json "$WORK/$NAME.json" \
          >"$WORK/$NAME.host$EMU_NODE.log" 2>&1' ||
        { cat "$work/$name".host*.log >&2; exit 1; }
      runs+=("$hosts $ranks $order $algo $work/$name.json")
    done
  done
done
# The sendrecv rate between two hosts through ringlet itself (second reference).
RANKS=1 "$emulate" --hosts 2 --rate "$rate" --timeout 60 -- '"$BIN/ringlet-run" --nnodes 2 \
  --node-rank "$EMU_NODE" --master-addr "$EMU_MASTER_ADDR" -n 1 "$BIN/ringlet-bench" \
  --ops sendrecv -b "$BYTES" -e "$BYTES" -n "$ITERS" -w 2 --json "$WORK/sendrecv.json" \
  >"$WORK/sendrecv.host$EMU_NODE.log" 2>&1'

printf '%s\n' "${runs[@]}" | /usr/bin/python3 "$here/../bench/plot_multi_host.py" \
  --stream "$stream" --sendrecv "$work/sendrecv.json" --rate "$rate" --out "$out"
