"""Summarizes ab.sh: per ranks, load, op and size, ringlet's time with the chain's frames one by
one (0) and in runs (1), Open MPI's in the same runs, and the ratios of their medians (us)."""
import glob
import json
import os
import statistics
import sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = {}
for path in sorted(glob.glob(os.path.join(here, "n*-*-*-*.json"))):
    n, load, sw, _ = os.path.basename(path)[:-5].split("-")
    for r in json.load(open(path))["results"]:
        v = rows.setdefault((int(n[1:]), load, r["op"], r["size"]), {"0": [], "1": [], "mpi": []})
        v[sw].append(r["out_of_place"]["time_us"])
        if sw == "1":
            v["mpi"].append(r["mpi"]["time_us"])

def rng(v):
    return f"{min(v):.1f}-{max(v):.1f}"

med = statistics.median
print("| N | load | op | bytes | one by one | in runs | runs / one by one | Open MPI | runs / MPI |")
print("| --- | --- | --- | ---: | --- | --- | ---: | --- | ---: |")
for (n, load, op, size), v in sorted(rows.items()):
    print(f"| {n} | {load} | {op} | {size} | {rng(v['0'])} | {rng(v['1'])} | "
          f"{med(v['1']) / med(v['0']):.2f} | {rng(v['mpi'])} | "
          f"{med(v['1']) / max(med(v['mpi']), 1e-3):.2f} |")
