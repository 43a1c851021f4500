#!/usr/bin/python3
"""How close the cost model comes, from `ringlet-model measure -o` reports.

For each report: the share of (collective, algorithm, size) points with size >= 64 KiB whose
prediction is within 25% of the measured median, with the parameters calibrated by the
communicator, and with parameters fitted to the measurements themselves (robust least squares on
the log of predicted/measured; at the calibrated memory scale the model is linear in alpha,
beta, gamma, delta and the one-way beta, and each row carries its `terms`). The fitted line says whether the formulas have the right shape; the
calibrated one whether create()'s short measurement finds the right parameters.

  model_accuracy.py docs/data/model-n2.json docs/data/model-n4.json > docs/data/model-accuracy.md
"""
import json
import sys

import numpy as np
from scipy.optimize import least_squares

MIN_BYTES = 64 << 10


def fit(rows, start):
    """Parameters minimising the squared log of predicted/measured (a robust loss, so that a
    few pathological points do not pull the rest), each kept positive."""
    terms = np.array([r["terms"] for r in rows])
    measured = np.array([r["measured_s"] for r in rows])
    used = terms.any(axis=0)

    def residual(theta):
        x = np.zeros(terms.shape[1])
        x[used] = np.exp(theta)
        return np.log(terms @ x) - np.log(measured)

    theta = np.log(np.maximum(start[used], 1e-15))
    result = least_squares(residual, theta, loss="soft_l1", f_scale=0.2)
    x = np.zeros(terms.shape[1])
    x[used] = np.exp(result.x)
    return x


def table(name, rows, params):
    within = 0
    lines = []
    for r in rows:
        predicted = r["predicted_s"] if params is None else float(np.dot(r["terms"], params))
        ratio = predicted / r["measured_s"]
        within += 0.75 <= ratio <= 1.25
        lines.append((r["collective"], r["algorithm"], r["bytes"], ratio))
    return within, lines


def main():
    for path in sys.argv[1:]:
        report = json.load(open(path))
        rows = [r for r in report["rows"] if r["bytes"] >= MIN_BYTES]
        m = report["model"]
        calibrated = np.array([m["alpha_s"], m["beta_s_per_byte"], m["gamma_s_per_byte"],
                               m["delta_s_per_byte"],
                               m["beta_one_way_s_per_byte"] or m["beta_s_per_byte"]])
        fitted = fit(rows, calibrated)
        n_cal, cal = table("calibrated", rows, None)
        n_fit, fit_lines = table("fitted", rows, fitted)
        print(f"### {report['ranks']} ranks ({report['links']}), sizes >= 64 KiB\n")
        print(f"Memory scale as calibrated: {m['small_factor']:.2f}x in the core's caches, "
              f"{m['memory_factor']:.2f}x past {m['cache_bytes'] / 2**20:.0f} MiB of cache per "
              "rank.\n")
        print("| parameters | alpha us | beta GB/s | gamma GB/s | delta GB/s | one-way GB/s "
              "| within 25% |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, p, n in (("calibrated by create()", calibrated, n_cal),
                            ("fitted to these points", fitted, n_fit)):
            # A rate the fit drove past 10^5 GB/s: that cost fitted to nothing.
            rate = ["%.2f" % (1e-9 / v) if 1e-9 / v < 1e5 else "> 1e5" if v > 0 else "inf"
                    for v in p[1:]]
            print(f"| {label} | {p[0] * 1e6:.2f} | {rate[0]} | {rate[1]} | {rate[2]} | "
                  f"{rate[3]} | {n} of {len(rows)} |")
        print("\npredicted / measured per point (calibrated, fitted):\n")
        print("| collective | algorithm | bytes | calibrated | fitted |")
        print("|---|---|---:|---:|---:|")
        for (c, a, b, r1), (_, _, _, r2) in zip(cal, fit_lines):
            print(f"| {c} | {a} | {b} | {r1:.2f} | {r2:.2f} |")
        print()


if __name__ == "__main__":
    main()
