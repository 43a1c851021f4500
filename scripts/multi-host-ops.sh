#!/usr/bin/env bash
# Every collective at one size across 2 and 4 emulated hosts (scripts/emulated-hosts.sh) with 2
# ranks per host, dealt in block and in cyclic order, on rate-limited links: each op's time
# against the least its busiest host link allows, and cyclic against block, beside what one TCP
# stream between two of the hosts moves in the same run. Needs root.
#
#   scripts/multi-host-ops.sh [BUILD_DIR] [OUT_DIR]
#
# The least time of an op at H hosts is the bytes its busiest host link must carry one way, at
# the stream's rate (m: the op's size as ringlet-bench counts it, nccl-tests' convention):
#   allreduce 2(H-1)/H m; allgather, reducescatter, gather, scatter (H-1)/H m (the root's host
#   link for the rooted ones); broadcast, reduce m; alltoall R(H-1)/H m (R ranks per host, each
#   sending the others' share of its buffer).
#
# Environment: RATE (tbf rate of every link end, default 1gbit), BYTES (default 16M), ITERS
# (timed calls, default 5), OPS (default every collective but barrier and sendrecv), HOSTS
# (default "2 4"). Writes OUT_DIR/multi-host-ops.{json,md} (default bench/results/).
set -euo pipefail
build="${1:-$(dirname "$0")/../build}"
out="${2:-$(dirname "$0")/../bench/results}"
rate="${RATE:-1gbit}"
bytes="${BYTES:-16M}"
iters="${ITERS:-5}"
ops="${OPS:-allreduce,allgather,reducescatter,broadcast,reduce,gather,scatter,alltoall}"
hosts_list="${HOSTS:-2 4}"
source "$(dirname "$0")/multi-host-common.sh"
export BYTES="$bytes" ITERS="$iters" OPS="$ops"

echo "one TCP stream at $rate ..." >&2
stream=$(python_streams stream 1 --rate "$rate")
echo "  $stream GB/s" >&2

: >"$work/runs.txt"
for hosts in $hosts_list; do
  for order in block cyclic; do
    name="h${hosts}r2${order}"
    echo "$ops at $bytes: $hosts hosts x 2 ranks ($order) ..." >&2
    ORDER=$order NAME=$name "$emulate" --hosts "$hosts" --rate "$rate" --timeout 300 -- \
      '"$BIN/ringlet-run" --nnodes "$EMU_HOSTS" --node-rank "$EMU_NODE" \
        --master-addr "$EMU_MASTER_ADDR" -n 2 --rank-order "$ORDER" "$BIN/ringlet-bench" \
        --ops "$OPS" -b "$BYTES" -e "$BYTES" -n "$ITERS" -w 2 --json "$WORK/$NAME.json" \
        >"$WORK/$NAME.host$EMU_NODE.log" 2>&1' ||
      { cat "$work/$name".host*.log >&2; exit 1; }
    echo "$hosts 2 $order $work/$name.json" >>"$work/runs.txt"
  done
done

/usr/bin/python3 - "$work/runs.txt" "$out" "$stream" "$rate" <<'EOF'
import datetime, json, platform, sys
runs_path, out, stream, rate = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]

def least_bytes(op, m, hosts, ranks):
    """Bytes the busiest host link carries one way, at the least."""
    share = (hosts - 1) / hosts
    return {"allreduce": 2 * share * m, "broadcast": m, "reduce": m,
            "alltoall": ranks * share * m, "alltoallv": ranks * share * m}.get(op, share * m)

rows = []
for line in open(runs_path):
    hosts, ranks, order, path = line.split()
    hosts, ranks = int(hosts), int(ranks)
    for r in json.load(open(path))["results"]:
        o = r["out_of_place"]
        if o["wrong"] != 0:
            sys.exit(f"{path}: {r['op']} has {o['wrong']} wrong elements")
        least_s = least_bytes(r["op"], r["size"], hosts, ranks) / (stream * 1e9)
        rows.append({"op": r["op"], "hosts": hosts, "ranks_per_host": ranks, "order": order,
                     "bytes": r["size"], "algorithm": r["algorithm"], "time_us": o["time_us"],
                     "busbw_gbs": o["busbw_gbs"], "least_us": least_s * 1e6,
                     "of_least": least_s * 1e6 / o["time_us"]})
size = rows[0]["bytes"]
doc = {"rate": rate, "bytes": size, "tcp_stream_gbs": stream,
       "date": datetime.date.today().isoformat(),
       "machine": platform.processor() or platform.machine(), "results": rows}
with open(f"{out}/multi-host-ops.json", "w") as f:
    json.dump(doc, f, indent=1)
lines = [
    f"Every collective (float32, {size >> 20} MiB, out of place) across emulated hosts with 2 "
    f"ranks each (network namespaces on one bridge, tbf {rate} on both ends of every link), "
    f"made by `scripts/multi-host-ops.sh`. One TCP stream between two hosts in the same run: "
    f"**{stream:.3f} GB/s**. `least` is the time the op's busiest host link needs at that rate "
    f"(the script's header has the formulas); `of least` = least / measured (1.00: the link is "
    f"full the whole call); `cyclic/block` compares the two placements' times.",
    "",
    "| op | hosts | algorithm (block, cyclic) | block ms | cyclic ms | least ms "
    "| of least (block, cyclic) | cyclic/block |",
    "| --- | ---: | --- | ---: | ---: | ---: | --- | ---: |",
]
key = lambda r: (r["op"], r["hosts"])
groups = {}
for r in rows:
    groups.setdefault(key(r), {})[r["order"]] = r
for (op, hosts), g in groups.items():
    b, c = g.get("block"), g.get("cyclic")
    if not b or not c:
        continue
    lines.append(
        f"| {op} | {hosts} | {b['algorithm']}, {c['algorithm']} | {b['time_us'] / 1e3:.1f} | "
        f"{c['time_us'] / 1e3:.1f} | {b['least_us'] / 1e3:.1f} | "
        f"{b['of_least']:.2f}, {c['of_least']:.2f} | {c['time_us'] / b['time_us']:.2f} |")
with open(f"{out}/multi-host-ops.md", "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
