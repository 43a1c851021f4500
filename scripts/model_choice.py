#!/usr/bin/python3
"""The cost model's choice against the fastest algorithm measured, from `ringlet-model measure -o`
reports: per collective and size, the algorithm with the smallest prediction (what the automatic
choice takes, beside the small-call paths that measure does not time) and its measured time over
the best measured one.

  scripts/model_choice.py docs/data/model-16core-n4.json ...
"""
import json, sys, collections
for f in sys.argv[1:]:
    d = json.load(open(f))
    by = collections.defaultdict(list)
    for r in d['rows']:
        by[(r['collective'], r['bytes'])].append(r)
    worst = []
    within = 0
    for (c, b), rows in sorted(by.items()):
        if len(rows) < 2: continue
        pick = min(rows, key=lambda r: r['predicted_s'])
        best = min(rows, key=lambda r: r['measured_s'])
        ratio = pick['measured_s'] / best['measured_s']
        within += ratio <= 1.10
        worst.append((ratio, c, b, pick['algorithm'], best['algorithm']))
    worst.sort(reverse=True)
    print(f"{f.split('/')[-1]}: ranks {d['ranks']}, choice within 10% of the best at {within} of {len(worst)} points; worst:",
          ', '.join(f"{c} {b} {p} vs {bb} {r:.2f}x" for r, c, b, p, bb in worst[:6]))
