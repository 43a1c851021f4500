#!/usr/bin/python3
"""How far repeated measurements of one setup agree, beside the cost model's accuracy, from two or
more `ringlet-model measure -o` reports of the same build, ranks and sizes: the model's goal is a
prediction within 25% of the measured time from 64 KiB up, and a run can only be predicted as
well as it repeats.

  scripts/model_repeat.py run1.json run2.json [run3.json ...]

Prints, for the points from 64 KiB up that every report has: each report's count of predictions
within 25% of its own measurement; for each pair of reports, at how many points one run's time
is within 25% of the other's (what a perfect predictor of one run would score on the other); and
the model (each report's prediction) against the median of all runs' times.
"""
import itertools
import json
import statistics
import sys


def within(a, b):
    return abs(a / b - 1) <= 0.25


def main(paths):
    if len(paths) < 2:
        sys.exit("ringlet: model_repeat.py needs two or more reports of one setup")
    reports = []
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        rows = {(r['collective'], r['algorithm'], r['bytes']): r for r in d['rows']}
        reports.append((path.split('/')[-1], d['ranks'], rows))
    if len({ranks for _, ranks, _ in reports}) != 1:
        sys.exit("ringlet: the reports are of different rank counts: " +
                 ", ".join(f"{n} {ranks}" for n, ranks, _ in reports))
    keys = sorted(set.intersection(*(set(k for k in rows if k[2] >= 65536)
                                     for _, _, rows in reports)))
    if not keys:
        sys.exit("ringlet: the reports share no point from 64 KiB up")
    print(f"ranks {reports[0][1]}, {len(keys)} points from 64 KiB up in all {len(reports)} reports")
    for name, _, rows in reports:
        n = sum(within(rows[k]['predicted_s'], rows[k]['measured_s']) for k in keys)
        print(f"  model within 25% of {name}: {n}")
    for (na, _, a), (nb, _, b) in itertools.combinations(reports, 2):
        n = sum(within(a[k]['measured_s'], b[k]['measured_s']) for k in keys)
        print(f"  {na} within 25% of {nb}: {n}")
    median = {k: statistics.median(rows[k]['measured_s'] for _, _, rows in reports) for k in keys}
    for name, _, rows in reports:
        n = sum(within(rows[k]['predicted_s'], median[k]) for k in keys)
        print(f"  model of {name} within 25% of the runs' median: {n}")


if __name__ == '__main__':
    main(sys.argv[1:])
