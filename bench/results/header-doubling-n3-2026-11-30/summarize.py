"""Per op and size: auto's pick and its time over the fastest forced algorithm's (auto/best),
before and after (three runs each, in turns), from the --vs-algos JSON reports here."""
import glob
import json
import os
import statistics
import sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = {}
for path in sorted(glob.glob(os.path.join(here, "*-*.json"))):
    build = os.path.basename(path).split("-")[0]
    for r in json.load(open(path))["results"]:
        best = min(t["time_us"] for t in r["algos"].values())
        v = rows.setdefault((r["op"], r["size"]), {"before": [], "after": [], "pick": {}})
        v[build].append(r["out_of_place"]["time_us"] / best)
        v["pick"][build] = r["algorithm"]
print("| op | bytes | before: pick, auto/best | after: pick, auto/best |")
print("| --- | ---: | --- | --- |")
for (op, size), v in sorted(rows.items()):
    cell = lambda b: (f"{v['pick'][b]}, " + " ".join(f"{x:.2f}" for x in v[b]))
    print(f"| {op} | {size} | {cell('before')} | {cell('after')} |")
