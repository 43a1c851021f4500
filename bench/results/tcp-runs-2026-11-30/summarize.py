"""Summarizes ab.sh's runs: ringlet's time before / after and Open MPI's, per op and size (us)."""
import glob
import json
import os
import statistics
import sys

# The runs of the directory given (default: this one's): its {idle,busy}-{before,after}-N.json.
here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = {}
for path in sorted(glob.glob(os.path.join(here, "*-*-*.json"))):
    load, build, _ = os.path.basename(path)[:-5].split("-")
    for r in json.load(open(path))["results"]:
        key = (load, r["op"], r["size"])
        rows.setdefault(key, {"before": [], "after": [], "mpi_before": [], "mpi_after": []})
        rows[key][build].append(r["out_of_place"]["time_us"])
        rows[key]["mpi_" + build].append(r["mpi"]["time_us"])

def rng(v):
    return f"{min(v):.2f}-{max(v):.2f}"

print("| load | op | bytes | ringlet before | ringlet after | after / before (medians) |"
      " Open MPI (same runs) | after / Open MPI (medians) |")
print("| --- | --- | ---: | --- | --- | ---: | --- | ---: |")
for (load, op, size), v in sorted(rows.items()):
    mpi = v["mpi_before"] + v["mpi_after"]
    print(f"| {load} | {op} | {size} | {rng(v['before'])} | {rng(v['after'])} | "
          f"{statistics.median(v['after']) / statistics.median(v['before']):.2f} | {rng(mpi)} | "
          f"{statistics.median(v['after']) / statistics.median(v['mpi_after']):.2f} |")
