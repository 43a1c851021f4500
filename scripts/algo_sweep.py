"""Tabulates scripts/algo-sweep.sh: per collective and size, each forced algorithm's time, the
automatic choice and its time over the best forced time. Usage: algo_sweep.py DIR N OUT_PREFIX"""
import glob
import json
import os
import statistics
import sys

directory, ranks, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
samples = {}  # (op, algo) -> {size: ([time_us per run], algorithm)}
for path in glob.glob(os.path.join(directory, f"n{ranks}-*-r*.json")):
    _, op, rest = os.path.basename(path)[:-5].split("-", 2)
    algo = rest.rsplit("-r", 1)[0]
    doc = json.load(open(path))
    if doc["total_wrong"]:
        sys.exit(f"ringlet: {path}: {doc['total_wrong']} wrong elements")
    for r in doc["results"]:
        times, _ = samples.setdefault((op, algo), {}).setdefault(r["size"], ([], None))
        times.append(r["out_of_place"]["time_us"])
        samples[(op, algo)][r["size"]] = (times, r.get("algorithm", algo))
runs = {key: {size: (statistics.median(t), a) for size, (t, a) in sizes.items()}
        for key, sizes in samples.items()}

lines = [f"# Automatic algorithm choice vs every forced algorithm, N={ranks}", "",
         "time in us (out of place, max over ranks; median of the runs); `auto/best` > 1.10 is marked with !", ""]
summary = []
for op in sorted({op for op, _ in runs}):
    algos = sorted(a for o, a in runs if o == op and a != "auto")
    lines += [f"## {op}", "",
              "| size | " + " | ".join(algos) + " | auto picks | auto | auto/best |",
              "|---:|" + "---:|" * len(algos) + "---|---:|---:|"]
    worst = 0.0
    for size in sorted(runs[(op, "auto")]):
        forced = {a: runs[(op, a)].get(size, (None, None))[0] for a in algos}
        best = min(t for t in forced.values() if t is not None)
        auto_time, picked = runs[(op, "auto")][size]
        ratio = auto_time / best if best > 0 else 1.0
        worst = max(worst, ratio)
        mark = " !" if ratio > 1.10 else ""
        cells = " | ".join(f"{forced[a]:.2f}" if forced[a] is not None else "" for a in algos)
        lines.append(f"| {size} | {cells} | {picked} | {auto_time:.2f} | {ratio:.2f}{mark} |")
    summary.append({"op": op, "worst_auto_over_best": worst})
    lines.append("")
lines += ["## worst auto/best per collective", ""] + [
    f"- {s['op']}: {s['worst_auto_over_best']:.2f}" for s in summary]
open(prefix + ".md", "w").write("\n".join(lines) + "\n")
json.dump({"ranks": int(ranks), "summary": summary}, open(prefix + ".json", "w"), indent=1)
print("\n".join(lines))
