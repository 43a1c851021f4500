#!/usr/bin/python3
"""Plots and tabulates ringlet-bench --vs-mpi JSON files (scripts/compare-mpi.sh runs it).

    /usr/bin/python3 bench/plot_results.py OUT_DIR RUN.json [RUN.json ...]

For every run (one world size and transport) and every operation in it, writes
OUT_DIR/<op>-n<N>-<transport>.png: bus bandwidth against size for ringlet and MPI, with the
memcpy reference of the same run as a dashed line. Then OUT_DIR/summary.md: per operation and
run, the ratio MPI time / ringlet time (> 1: ringlet faster) at the smallest, a middle and the
largest size, and both bus bandwidths at the largest size.

The run's name comes from the JSON file name: n2-shm.json -> "n2-shm".
"""

import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

MPI_LABELS = {"shm": "Open MPI (vader shared memory)", "tcp": "Open MPI (TCP, loopback)"}


def human(size):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def load(path):
    with open(path) as f:
        doc = json.load(f)
    name = os.path.splitext(os.path.basename(path))[0]
    transport = name.split("-")[-1]
    by_op = {}
    for record in doc["results"]:
        by_op.setdefault(record["op"], []).append(record)
    return name, transport, doc, by_op


def plot(out_dir, name, transport, doc, op, records):
    rows = [r for r in records if r["size"] > 0]
    if not rows:
        return None
    config = doc["config"]
    sizes = [r["size"] for r in rows]
    fig, ax = plt.subplots(figsize=(9.6, 6.0))
    # The algorithms the rows ran, in size order (the automatic choice changes with the size).
    algorithms = list(dict.fromkeys(r.get("algorithm", "auto") for r in rows))
    ax.plot(sizes, [r["out_of_place"]["busbw_gbs"] for r in rows], "o-", ms=3, lw=2,
            label=f"ringlet ({transport}; {', '.join(algorithms)})")
    mpi = [(r["size"], r["mpi"]["busbw_gbs"]) for r in rows if r.get("mpi")]
    if mpi:
        ax.plot(*zip(*mpi), "s-", ms=3, lw=2, label=MPI_LABELS.get(transport, "MPI"))
    copy = [(r["size"], r["copy_gbs"]) for r in rows if r.get("copy_gbs")]
    if copy:
        ax.plot(*zip(*copy), "--", color="gray", lw=1.2,
                label="memcpy of the same size, every rank at once (GB/s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # small and large sizes differ by orders of magnitude
    # Ticks at powers of two (the v-forms' sizes round down to whole blocks: 33554424 sits at 32M).
    exponents = [round(math.log2(s)) for s in sizes]
    ticks = sorted({1 << e for e in exponents if e % 4 == 3 or e == exponents[-1]})
    ax.set_xticks(ticks, [human(s) for s in ticks])
    ax.set_xlabel("size (bytes, total buffer as in nccl-tests)")
    ax.set_ylabel("bus bandwidth (GB/s, log)")
    ax.set_title(f"{config['datatype']} {op}, {config['world_size']} ranks, one host "
                 f"({config.get('links', '')})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    path = os.path.join(out_dir, f"{op}-{name}.png")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def ratio_at(rows, index):
    r = rows[index]
    if not r.get("mpi") or r["out_of_place"]["time_us"] <= 0:
        return "n/a"
    return f"{r['mpi']['time_us'] / r['out_of_place']['time_us']:.3g}"


def summary(out_dir, runs):
    lines = ["# ringlet vs Open MPI, per operation", "",
             "ratio = MPI time / ringlet time (> 1: ringlet faster); busbw in GB/s at the largest "
             "size; copy = memcpy of that size, every rank at once.", ""]
    ops = []
    for _, _, _, by_op in runs:
        ops += [op for op in by_op if op not in ops]
    for op in ops:
        lines += [f"## {op}", "",
                  "| run | ratio smallest | ratio middle | ratio largest | ringlet busbw | "
                  "MPI busbw | copy | #wrong |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name, _, _, by_op in runs:
            rows = [r for r in by_op.get(op, []) if r["size"] > 0 or op == "barrier"]
            if not rows:
                continue
            last = rows[-1]
            wrong = sum((r["out_of_place"]["wrong"] or 0) + ((r.get("mpi") or {}).get("wrong") or 0)
                        for r in rows)
            mpi_bw = f"{last['mpi']['busbw_gbs']:.3f}" if last.get("mpi") else "n/a"
            copy = f"{last['copy_gbs']:.2f}" if last.get("copy_gbs") else "-"
            sizes = f"{human(rows[0]['size'])}..{human(last['size'])}"
            lines.append(f"| {name} ({sizes}) | {ratio_at(rows, 0)} | "
                         f"{ratio_at(rows, len(rows) // 2)} | {ratio_at(rows, -1)} | "
                         f"{last['out_of_place']['busbw_gbs']:.3f} | {mpi_bw} | {copy} | {wrong} |")
        lines.append("")
    path = os.path.join(out_dir, "summary.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: plot_results.py OUT_DIR RUN.json [RUN.json ...]")
    out_dir = argv[1]
    runs = [load(path) for path in argv[2:]]
    for name, transport, doc, by_op in runs:
        for op, records in by_op.items():
            if op != "barrier":
                path = plot(out_dir, name, transport, doc, op, records)
                if path:
                    print(f"compare-mpi: wrote {path}", file=sys.stderr)
    print(f"compare-mpi: wrote {summary(out_dir, runs)}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
