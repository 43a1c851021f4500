#!/usr/bin/python3
"""Trace mode's cost from ringlet-bench JSON files: runs with it off, then `--`, runs with it on
(alternated in one session). Per size: the median time of each group and on/off.

  overhead.py off-1.json off-2.json -- on-1.json on-2.json
"""
import json
import statistics
import sys


def times(paths):
    out = {}
    for p in paths:
        for r in json.load(open(p))["results"]:
            out.setdefault(r["size"], []).append(r["out_of_place"]["time_us"])
    return out


def main():
    args = sys.argv[1:]
    if "--" not in args:
        print("usage: overhead.py OFF.json... -- ON.json...", file=sys.stderr)
        sys.exit(2)
    cut = args.index("--")
    off, on = times(args[:cut]), times(args[cut + 1:])
    print("| bytes | off: median us | on: median us | on / off | off runs (us) | on runs (us) |")
    print("|---:|---:|---:|---:|---|---|")
    for size in sorted(off):
        a, b = statistics.median(off[size]), statistics.median(on[size])
        print(f"| {size} | {a:.2f} | {b:.2f} | {b / a:.3f} | "
              f"{', '.join(f'{t:.1f}' for t in off[size])} | "
              f"{', '.join(f'{t:.1f}' for t in on[size])} |")


if __name__ == "__main__":
    main()
