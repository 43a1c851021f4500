#!/usr/bin/env bash
# The automatic algorithm choice against every forced algorithm: at N ranks, ringlet-bench
# --vs-algos times each collective's algorithms forced and the cost model's choice in turns (-r
# rounds per size, each starting one variant later, on dup()s of one communicator: one
# calibration, one model), and scripts/algo_sweep.py tabulates per size the auto time over the
# best forced time. Writes bench/results/algo-sweep-n<N>.{md,json} (the md ends with the counts:
# forcible picks within 1.10 of the fastest, and how far two timings of one algorithm in the same
# turns stray from each other) and the bench's report, algo-sweep-n<N>-bench.json.gz.
#
# --separate-runs: one ringlet-bench run per algorithm and repeat instead (RINGLET_ALGO via
# --algo), each configuration -r times, interleaved (each repeat in an order rotated by one);
# every run calibrates its own model, so the choice moves with the machine's state between runs
# as well, and runs minutes apart differ by more than 10% on a shared machine.
#
#   scripts/algo-sweep.sh [-n "2 3 4"] [-e 256M] [-r 3] [--ops "allreduce allgather"] [--transport shm]
#                         [--suffix vforms]   (writes algo-sweep-n<N>-vforms.{md,json})
#                         [--min-time-ms 20]  (time per size, variant and round; longer is steadier)
#                         [--separate-runs]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks="2 3 4"
maxbytes=256M
ops="allreduce broadcast reduce allgather reducescatter alltoall gather scatter allgatherv reducescatterv gatherv scatterv"
transport=shm
repeats=3
suffix=""
min_time_ms=20
separate=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) ranks="$2"; shift 2 ;;
    -e) maxbytes="$2"; shift 2 ;;
    -r) repeats="$2"; shift 2 ;;
    --ops) ops="$2"; shift 2 ;;
    --transport) transport="$2"; shift 2 ;;
    --suffix) suffix="-$2"; shift 2 ;;
    --min-time-ms) min_time_ms="$2"; shift 2 ;;
    --separate-runs) separate=1; shift ;;
    *) echo "ringlet: algo-sweep.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bin=build/bin
out=bench/results
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
"$bin/ringlet-info" --json >"$tmp/info.json"
for n in $ranks; do
  if [[ $separate == 0 ]]; then
    echo "N=$n ${ops// /,}: in turns, $repeats rounds" >&2
    RINGLET_TRANSPORT=$transport "$bin/ringlet-run" -n "$n" "$bin/ringlet-bench" \
      --ops "${ops// /,}" --vs-algos --rounds "$repeats" -b 8 -e "$maxbytes" -f 4 -n auto \
      --min-time-ms "$min_time_ms" -w 3 -c 1 --json "$tmp/n$n-turns.json" >/dev/null
    /usr/bin/python3 scripts/algo_sweep.py "$tmp" "$n" "$out/algo-sweep-n$n$suffix"
    # The bench's own report, so that the tables can be made again (algo_sweep.py DIR N PREFIX
    # with it unpacked as DIR/nN-turns.json).
    gzip -9c "$tmp/n$n-turns.json" >"$out/algo-sweep-n$n$suffix-bench.json.gz"
    continue
  fi
  for op in $ops; do
    algos=$(/usr/bin/python3 -c "import json,sys; print(' '.join(json.load(open('$tmp/info.json'))['algorithms']['$op']))")
    all=(auto $algos)
    for ((r = 1; r <= repeats; r++)); do
      # Each repeat starts one configuration later, so that no configuration (the automatic
      # choice included) always runs first, right after another collective's runs.
      for ((k = 0; k < ${#all[@]}; k++)); do
        algo=${all[$(((k + r - 1) % ${#all[@]}))]}
        echo "N=$n $op $algo run $r" >&2
        RINGLET_TRANSPORT=$transport "$bin/ringlet-run" -n "$n" "$bin/ringlet-bench" --ops "$op" \
          --algo "$algo" -b 8 -e "$maxbytes" -f 4 -n auto --min-time-ms "$min_time_ms" -w 3 -c 1 \
          --json "$tmp/n$n-$op-$algo-r$r.json" >/dev/null
      done
    done
  done
  /usr/bin/python3 scripts/algo_sweep.py "$tmp" "$n" "$out/algo-sweep-n$n$suffix"
done
