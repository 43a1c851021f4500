#!/usr/bin/env bash
# Several TCP streams per rank pair (RINGLET_SOCKET_STREAMS) against one, 2 ranks over tcp, on
# three links measured in the same run:
#   loopback       one host, no namespaces (RINGLET_TRANSPORT=tcp)
#   veth           two emulated hosts (scripts/emulated-hosts.sh), link not shaped
#   flow-limited   two emulated hosts, link 1 Gbit/s (tbf) and every TCP flow policed to 250
#                  Mbit/s (iptables hashlimit): a link that one stream cannot fill, as in clouds
#                  that cap a single flow
# Each case reports the busbw of a 16 MiB all-reduce per stream count, the median of ROUNDS
# rounds that alternate the counts, beside what 1 and 4 TCP streams of Python sockets move
# between the same two hosts (the link's references; rate over the second half of 480 MiB, past
# the policer's burst).
#
#   scripts/multi-stream-bench.sh [BUILD_DIR] [OUT_DIR]
#
# Environment: STREAMS (default "1 2 4 8"), ROUNDS (default 3), BYTES (default 16M), RATE
# (default 1gbit), FLOW_RATE (default 250mbit), CASES (default "loopback veth flow-limited").
# Needs root and iptables for the emulated hosts (apt-get install iptables); writes
# OUT_DIR/multi-stream.{json,md} (default bench/results/).
set -euo pipefail
build="${1:-$(dirname "$0")/../build}"
out="${2:-$(dirname "$0")/../bench/results}"
streams_list="${STREAMS:-1 2 4 8}"
rounds="${ROUNDS:-3}"
bytes="${BYTES:-16M}"
rate="${RATE:-1gbit}"
flow_rate="${FLOW_RATE:-250mbit}"
cases="${CASES:-loopback veth flow-limited}"
source "$(dirname "$0")/multi-host-common.sh"
export BYTES="$bytes"

# One ringlet run: 2 ranks, all-reduce at BYTES, K streams.
ringlet_run() {  # case streams round
  local case="$1" k="$2" round="$3" name="$1-s$2-r$3"
  case "$case" in
    loopback)
      RINGLET_TRANSPORT=tcp RINGLET_SOCKET_STREAMS="$k" "$BIN/ringlet-run" -n 2 \
        "$BIN/ringlet-bench" --ops allreduce -b "$bytes" -e "$bytes" -n 20 \
        --warmup-ms 500 --json "$work/$name.json" >"$work/$name.log" 2>&1 ||
        { cat "$work/$name.log" >&2; exit 1; }
      ;;
    veth | flow-limited)
      local shape=()
      [[ "$case" == flow-limited ]] && shape=(--rate "$rate" --flow-rate "$flow_rate")
      # Warm-up past the policer's burst (one second of FLOW_RATE per flow).
      K="$k" NAME="$name" "$emulate" --hosts 2 "${shape[@]}" --timeout 240 -- \
        'RINGLET_SOCKET_STREAMS="$K" "$BIN/ringlet-run" --nnodes 2 --node-rank "$EMU_NODE" \
          --master-addr "$EMU_MASTER_ADDR" -n 1 "$BIN/ringlet-bench" --ops allreduce \
          -b "$BYTES" -e "$BYTES" -n 8 --warmup-ms 4000 --json "$WORK/$NAME.json" \
          >"$WORK/$NAME.host$EMU_NODE.log" 2>&1' ||
        { cat "$work/$name".host*.log >&2; exit 1; }
      ;;
  esac
  echo "$case $k $round $work/$name.json" >>"$work/runs.txt"
}

: >"$work/runs.txt"
: >"$work/refs.txt"
for case in $cases; do
  if [[ "$case" != loopback ]]; then
    shape=()
    [[ "$case" == flow-limited ]] && shape=(--rate "$rate" --flow-rate "$flow_rate")
    echo "$case: Python TCP streams ..." >&2
    one=$(python_streams "$case-1" 1 "${shape[@]}")
    many=$(python_streams "$case-4" 4 "${shape[@]}")
    echo "$case $one $many" >>"$work/refs.txt"
  fi
  for ((round = 1; round <= rounds; round++)); do
    for k in $streams_list; do
      echo "$case: $k streams, round $round ..." >&2
      ringlet_run "$case" "$k" "$round"
    done
  done
done

/usr/bin/python3 - "$work/runs.txt" "$work/refs.txt" "$out" "$bytes" "$rate" "$flow_rate" <<'EOF'
import json, statistics, sys, platform, datetime
runs_path, refs_path, out, size, rate, flow_rate = sys.argv[1:]
refs = {}
for line in open(refs_path):
    case, one, many = line.split()
    refs[case] = {"one_stream_gbs": float(one), "four_streams_gbs": float(many)}
busbw = {}
for line in open(runs_path):
    case, k, rnd, path = line.split()
    for r in json.load(open(path))["results"]:
        busbw.setdefault((case, r["op"], int(k)), []).append(r["out_of_place"]["busbw_gbs"])
cases = sorted({c for c, _, _ in busbw}, key=["loopback", "veth", "flow-limited"].index)
result = {"size": size, "rate": rate, "flow_rate": flow_rate,
          "date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
          "references": refs, "busbw_gbs": []}
lines = [f"# Several TCP streams per rank pair ({size}, 2 ranks, busbw GB/s, median of rounds)", "",
         "Made by `scripts/multi-stream-bench.sh`. `x1` = against 1 stream in the same case.",
         f"flow-limited: link {rate} (tbf), every TCP flow policed to {flow_rate}.", ""]
for case in cases:
    ks = sorted({k for c, _, k in busbw if c == case})
    ref = refs.get(case)
    if ref:
        lines.append(f"**{case}**: Python TCP, 1 stream {ref['one_stream_gbs']:.3f} GB/s, "
                     f"4 streams {ref['four_streams_gbs']:.3f} GB/s")
    else:
        lines.append(f"**{case}**")
    lines += ["", "| op | " + " | ".join(f"{k} stream{'s' if k > 1 else ''}" for k in ks) + " |",
              "| --- |" + " --- |" * len(ks)]
    for op in ("allreduce",):
        med = {k: statistics.median(busbw[(case, op, k)]) for k in ks if (case, op, k) in busbw}
        if not med:
            continue
        base = med[ks[0]]
        cells = [f"{med[k]:.3f} (x{med[k] / base:.2f})" for k in ks]
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
        for k in ks:
            result["busbw_gbs"].append({"case": case, "op": op, "streams": k,
                                        "median": med[k], "rounds": busbw[(case, op, k)]})
    lines.append("")
open(f"{out}/multi-stream.json", "w").write(json.dumps(result, indent=1) + "\n")
open(f"{out}/multi-stream.md", "w").write("\n".join(lines))
print("\n".join(lines))
EOF
