#!/usr/bin/python3
"""Tabulates and plots scripts/multi-host-bench.sh: all-reduce busbw against the number of hosts.

    ... | /usr/bin/python3 bench/plot_multi_host.py --stream GBS --sendrecv FILE --rate R --out DIR

Reads lines "HOSTS RANKS_PER_HOST ORDER ALGO RUN.json" (ALGO: what --algo asked, auto or a name) on stdin (ringlet-bench --json of one size).
Writes DIR/multi-host-allreduce.json (every number), DIR/multi-host-allreduce.md (the table) and
DIR/multi-host-allreduce.png (busbw against hosts, one line per layout, the TCP stream's rate as
a dashed line; needs matplotlib).
"""

import argparse
import json
import os
import sys


def load(path):
    with open(path) as f:
        doc = json.load(f)
    (row,) = doc["results"]
    if row["out_of_place"]["wrong"] != 0:
        sys.exit(f"{path}: {row['out_of_place']['wrong']} wrong elements")
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stream", type=float, required=True, help="one TCP stream, GB/s")
    parser.add_argument("--sendrecv", required=True, help="ringlet-bench sendrecv JSON, 2 hosts")
    parser.add_argument("--rate", required=True, help="tbf rate of the links")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    sendrecv = load(args.sendrecv)
    rows = []
    for line in sys.stdin:
        if not line.strip():
            continue
        hosts, ranks, order, asked, path = line.split()
        r = load(path)
        rows.append({
            "hosts": int(hosts),
            "ranks_per_host": int(ranks),
            "order": order,
            "asked": asked,
            "world_size": r["world_size"],
            "bytes": r["size"],
            "algorithm": r["algorithm"],
            "time_us": r["out_of_place"]["time_us"],
            "busbw_gbs": r["out_of_place"]["busbw_gbs"],
            "busbw_over_stream": r["out_of_place"]["busbw_gbs"] / args.stream,
        })
    size = rows[0]["bytes"]
    doc = {"rate": args.rate, "bytes": size, "tcp_stream_gbs": args.stream,
           "sendrecv_busbw_gbs": sendrecv["out_of_place"]["busbw_gbs"], "allreduce": rows}
    base = os.path.join(args.out, "multi-host-allreduce")
    with open(base + ".json", "w") as f:
        json.dump(doc, f, indent=2)

    lines = [
        f"All-reduce (float32 sum, {size >> 20} MiB, out of place) across emulated hosts "
        f"(network namespaces on one bridge, tbf {args.rate} on both ends of every link). "
        f"One TCP stream between two hosts in the same run: **{args.stream:.3f} GB/s**; "
        f"ringlet-bench sendrecv between two hosts: "
        f"{sendrecv['out_of_place']['busbw_gbs']:.3f} GB/s.",
        "",
        "| hosts | ranks/host | order | ranks | --algo | algorithm | time (ms) | busbw (GB/s) "
        "| busbw / stream |",
        "| ---: | ---: | --- | ---: | --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(f"| {r['hosts']} | {r['ranks_per_host']} | {r['order']} | {r['world_size']} | "
                     f"{r['asked']} | {r['algorithm']} | {r['time_us'] / 1000:.1f} | {r['busbw_gbs']:.3f} | "
                     f"{r['busbw_over_stream']:.2f} |")
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing: no PNG (apt-get install python3-matplotlib)", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    layouts = sorted({(r["asked"], r["ranks_per_host"], r["order"]) for r in rows})
    colors = {}
    for asked, ranks, order in layouts:
        pts = sorted((r["hosts"], r["busbw_gbs"]) for r in rows
                     if (r["asked"], r["ranks_per_host"], r["order"]) == (asked, ranks, order))
        color = colors.setdefault((ranks, order), f"C{len(colors)}")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color,
                linestyle="-" if asked == "auto" else ":",
                label=f"{ranks} rank{'s' if ranks > 1 else ''}/host ({order}), {asked}")
    ax.axhline(args.stream, linestyle="--", color="gray", label="one TCP stream")
    ax.set_xticks(sorted({r["hosts"] for r in rows}))
    ax.set_xlabel("hosts")
    ax.set_ylabel("all-reduce busbw (GB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"ringlet all-reduce {size >> 20} MiB, emulated hosts, {args.rate} links")
    ax.legend()
    fig.tight_layout()
    fig.savefig(base + ".png", dpi=120)


if __name__ == "__main__":
    main()
