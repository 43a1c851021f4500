"""Draws bench/results/torch-allreduce-n2.png from its JSON: busbw and time, ringlet vs gloo."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    d = json.load(open(src))
    rows = d["rows"]
    x = [r["bytes"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for name, style in (("ringlet", "o-"), ("gloo", "s--")):
        a.plot(x, [r[name]["busbw_gbs"] for r in rows], style, label=name)
        b.plot(x, [r[name]["seconds"] * 1e6 for r in rows], style, label=name)
    for ax, title in ((a, "busbw (GB/s)"), (b, "time per call (µs)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend()
    b.set_yscale("log")
    fig.suptitle(f"torch.distributed.all_reduce, {d['ranks']} ranks: ringlet vs gloo (same run)")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
