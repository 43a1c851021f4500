#!/usr/bin/python3
"""Other shapes for the cost model's memory scale, tried on `ringlet-model measure -o` reports.

The model (collectives/select.cc, memoryScale) multiplies every per-byte cost of a call by how far
a rank's buffers overflow its share of the last-level cache. Each report row carries its terms at
that scale; this divides the scale back out and predicts again with:
  mult     the model as it is;
  add      (scale - 1) x the calibrated copy cost added to each per-byte cost instead;
  compute  only the reduce and copy terms scaled, the link's bytes not;
  none     no scale past the cache.
For each: points >= 64 KiB within 25% of measured, and the sizes at which the algorithm with the
smallest prediction is within 10% of the fastest measured.

  docs/memory_variants.py docs/data/model-*.json
"""
import json
import math
import sys

VARIANTS = ("mult", "add", "compute", "none")
MIN_BYTES = 64 << 10


def memory_scale(model, working_set):
    """collectives/select.cc memoryScale: piecewise linear in log2 of the working set."""
    x = math.log2(max(working_set, 1.0))
    small, calibrated = 18, 21  # 256 KiB and 2 MiB: the calibration shifts' buffers

    def between(x0, y0, x1, y1):
        return y0 + (y1 - y0) * min(max((x - x0) / (x1 - x0), 0.0), 1.0)

    if x <= calibrated:
        return between(small, model["small_factor"], calibrated, 1.0)
    if model["cache_bytes"] <= 0:
        return 1.0
    cache = max(math.log2(model["cache_bytes"]), calibrated)
    return between(cache, 1.0, cache + 3, model["memory_factor"])  # kMemoryRampDoublings


def working_set(collective, m, n):
    """collectives/select.cc workingSetBytes."""
    if collective in ("allreduce", "reduce", "alltoall"):
        return 2 * m
    if collective == "broadcast":
        return m
    return m + m / n


def predict(row, model, ranks, variant):
    p = [model["alpha_s"], model["beta_s_per_byte"], model["gamma_s_per_byte"],
         model["delta_s_per_byte"],
         model["beta_one_way_s_per_byte"] or model["beta_s_per_byte"]]
    s = memory_scale(model, working_set(row["collective"], row["bytes"], ranks))
    terms = row["terms"]
    if variant == "mult" or s <= 1:
        return sum(t * q for t, q in zip(terms, p))
    raw = [terms[0]] + [t / s for t in terms[1:]]  # the per-byte terms before the scale
    if variant == "add":
        extra = (s - 1) * p[3]
        return raw[0] * p[0] + sum(raw[i] * (p[i] + extra) for i in range(1, 5))
    if variant == "compute":
        return raw[0] * p[0] + raw[1] * p[1] + raw[4] * p[4] + (raw[2] * p[2] + raw[3] * p[3]) * s
    return sum(t * q for t, q in zip(raw, p))  # none


def main():
    for path in sys.argv[1:]:
        report = json.load(open(path))
        model, ranks = report["model"], report["ranks"]
        rows = [r for r in report["rows"] if r["bytes"] >= MIN_BYTES]
        groups = {}
        for r in report["rows"]:
            groups.setdefault((r["collective"], r["bytes"]), []).append(r)
        out = []
        for v in VARIANTS:
            within = sum(0.75 <= predict(r, model, ranks, v) / r["measured_s"] <= 1.25
                         for r in rows)
            chosen = 0
            for candidates in groups.values():
                pick = min(candidates, key=lambda r: predict(r, model, ranks, v))
                chosen += pick["measured_s"] <= 1.10 * min(r["measured_s"] for r in candidates)
            out.append(f"{v} {within}/{len(rows)}, choice {chosen}/{len(groups)}")
        print(f"{path.split('/')[-1]} (memory factor {model['memory_factor']:.2f}): " +
              "; ".join(out))


if __name__ == "__main__":
    main()
