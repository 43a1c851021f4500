"""Tabulates scripts/algo-sweep.sh: per collective and size, each forced algorithm's time, the
automatic choice and its time over the best forced time. Usage: algo_sweep.py DIR N OUT_PREFIX

DIR holds either one `ringlet-bench --vs-algos` report per N (n<N>-turns.json: every algorithm
forced in turns with auto, in one process, one cost model) or one report per algorithm and
repeat (n<N>-<op>-<algo>-r<k>.json: separate runs, each with its own calibration).

Two ratios: `auto/best` (the automatic run's time over the best forced run's) and `pick/best`
(the forced run of the algorithm auto picked over the best forced run; "-" where auto picked a
path that cannot be forced, e.g. the header-inline calls, or "none" where no algorithm runs: a
zero-count unrooted call, which every forced run takes the same way). Where auto picks the best
algorithm, pick/best is 1 and auto/best is the spread between two runs of one algorithm: it came out
0.90-1.18 at 3 and 4 ranks on 16 idle cores. The choice is judged by pick/best where there is
one, else by auto/best (not at all where it picked "none"); a choice over 1.10 is marked with
!."""
import glob
import json
import os
import statistics
import sys

directory, ranks, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
samples = {}  # (op, algo) -> {size: ([time_us per run], algorithm)}
turns = os.path.join(directory, f"n{ranks}-turns.json")
if os.path.exists(turns):
    doc = json.load(open(turns))
    if doc["total_wrong"]:
        sys.exit(f"ringlet: {turns}: {doc['total_wrong']} wrong elements")
    for r in doc["results"]:
        if "algos" not in r:
            continue
        samples.setdefault((r["op"], "auto"), {})[r["size"]] = (
            [r["out_of_place"]["time_us"]], r["algorithm"])
        for name, t in r["algos"].items():
            samples.setdefault((r["op"], name), {})[r["size"]] = ([t["time_us"]], name)
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

how = ("every algorithm forced in turns with auto in one process, the median of the rounds"
       if os.path.exists(turns) else "separate runs, the median of the runs")
lines = [f"# Automatic algorithm choice vs every forced algorithm, N={ranks}", "",
         f"time in us (out of place, max over ranks; {how}); `pick/best`: the forced "
         "run of auto's pick over the best forced run (`-`: a path that cannot be forced); the "
         "choice (pick/best, else auto/best; none where no algorithm runs) > 1.10 is marked "
         "with !", ""]
summary = []
judged = []  # (op, size, pick/best) where auto's pick can be forced
same = []  # auto's own time over its pick's forced time: one algorithm timed twice in turns
for op in sorted({op for op, _ in runs}):
    algos = sorted(a for o, a in runs if o == op and a != "auto")
    lines += [f"## {op}", "",
              "| size | " + " | ".join(algos) + " | auto picks | auto | auto/best | pick/best |",
              "|---:|" + "---:|" * len(algos) + "---|---:|---:|---:|"]
    worst = 0.0
    worst_choice = 0.0
    for size in sorted(runs[(op, "auto")]):
        forced = {a: runs[(op, a)].get(size, (None, None))[0] for a in algos}
        best = min(t for t in forced.values() if t is not None)
        auto_time, picked = runs[(op, "auto")][size]
        ratio = auto_time / best if best > 0 else 1.0
        pick = forced.get(picked)
        pick_ratio = pick / best if pick is not None and best > 0 else None
        # "none": the call runs no algorithm (a zero-count one passes its header on), and the
        # forced runs took that same path: two runs of one path, no choice to judge.
        choice = None if picked == "none" else pick_ratio if pick_ratio is not None else ratio
        if picked != "none" and pick_ratio is not None:
            judged.append((op, size, pick_ratio))
            same.append(auto_time / pick)
        worst = max(worst, ratio)
        if choice is not None:
            worst_choice = max(worst_choice, choice)
        mark = " !" if choice is not None and choice > 1.10 else ""
        cells = " | ".join(f"{forced[a]:.2f}" if forced[a] is not None else "" for a in algos)
        pick_cell = f"{pick_ratio:.2f}" if pick_ratio is not None else "-"
        lines.append(f"| {size} | {cells} | {picked} | {auto_time:.2f} | {ratio:.2f} | "
                     f"{pick_cell}{mark} |")
    summary.append({"op": op, "worst_auto_over_best": worst, "worst_choice": worst_choice})
    lines.append("")
lines += ["## worst per collective: the choice (pick/best, else auto/best) and auto/best", ""] + [
    f"- {s['op']}: {s['worst_choice']:.2f}, {s['worst_auto_over_best']:.2f}" for s in summary]
# The count the target asks for, and how far two timings of one algorithm in the same turns
# (auto running its pick, and the pick forced) stray from each other: where they differ by more
# than 10%, a pick/best just over 1.10 says no more than the runs' own spread.
within = [j for j in judged if j[2] <= 1.10]
spread = sorted(abs(x - 1) for x in same)
apart = sum(1 for x in spread if x > 0.10)
counts = {"forcible_picks": len(judged), "within_10_percent": len(within),
          "same_algorithm_apart_over_10_percent": apart,
          "same_algorithm_median_spread": statistics.median(spread) if spread else 0.0}
lines += ["", "## counts", "",
          f"- forcible picks within 1.10 of the fastest forced: {len(within)} of {len(judged)}",
          "- misses: " + ("; ".join(f"{op} {size} {r:.2f}" for op, size, r in judged if r > 1.10)
                          or "none"),
          f"- one algorithm timed twice in the same turns (auto's run of its pick, and the pick "
          f"forced): apart by more than 10% at {apart} of {len(spread)} sizes, median "
          f"{counts['same_algorithm_median_spread']:.1%} apart"]
open(prefix + ".md", "w").write("\n".join(lines) + "\n")
json.dump({"ranks": int(ranks), "summary": summary, "counts": counts}, open(prefix + ".json", "w"),
          indent=1)
print("\n".join(lines))
