#!/usr/bin/python3
"""Predicted against measured times from `ringlet-model measure -o` reports, one PNG per report:
a panel per collective, a colour per algorithm, measured as points, the model as lines.

  plot_model.py docs/data/model-n2.json docs/images/model-n2.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        print("usage: plot_model.py REPORT.json OUT.png", file=sys.stderr)
        sys.exit(2)
    report = json.load(open(sys.argv[1]))
    rows = report["rows"]
    collectives = list(dict.fromkeys(r["collective"] for r in rows))
    fig, axes = plt.subplots(2, len(collectives), figsize=(4.2 * len(collectives), 6.4),
                             squeeze=False, gridspec_kw={"height_ratios": [3, 2]})
    colours = plt.get_cmap("tab10")
    for ax, collective in zip(axes[0], collectives):
        mine = [r for r in rows if r["collective"] == collective]
        for i, algorithm in enumerate(dict.fromkeys(r["algorithm"] for r in mine)):
            pts = [r for r in mine if r["algorithm"] == algorithm]
            x = [r["bytes"] for r in pts]
            ax.plot(x, [r["predicted_s"] * 1e6 for r in pts], "-", color=colours(i),
                    label=f"{algorithm} model")
            ax.plot(x, [r["measured_s"] * 1e6 for r in pts], "o", color=colours(i), ms=4,
                    label=f"{algorithm} measured")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(collective)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    # Second row: predicted / measured, with the +-25% band.
    for ax, collective in zip(axes[1], collectives):
        mine = [r for r in rows if r["collective"] == collective]
        ax.axhspan(0.75, 1.25, color="#dddddd", zorder=0)
        ax.axhline(1.0, color="#888888", linewidth=0.8)
        for i, algorithm in enumerate(dict.fromkeys(r["algorithm"] for r in mine)):
            pts = [r for r in mine if r["algorithm"] == algorithm]
            ax.plot([r["bytes"] for r in pts], [r["predicted_s"] / r["measured_s"] for r in pts],
                    "o-", color=colours(i), ms=3, label=algorithm)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(0.1, 10)
        ax.set_xlabel("bytes")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("microseconds per call")
    axes[1][0].set_ylabel("predicted / measured\n(grey: within 25%)")
    m = report["model"]
    fig.suptitle(f"{report['ranks']} ranks, {report['links']}: alpha {m['alpha_s'] * 1e6:.2f} us, "
                 f"beta {1e-9 / m['beta_s_per_byte']:.2f} GB/s, "
                 f"gamma {1e-9 / m['gamma_s_per_byte']:.2f} GB/s, "
                 f"delta {1e-9 / m['delta_s_per_byte']:.2f} GB/s", fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print(f"wrote {sys.argv[2]}")


if __name__ == "__main__":
    main()
