#!/usr/bin/python3
"""Every stored `ringlet-model measure -o` report in the repository predicted again by this build's
model (`ringlet-model predict`), and the two measures counted over all of them: points of 64 KiB
and more within 25% of the measured time, and collective sizes where the algorithm predicted
fastest ran within 10% of the fastest measured. A change to the model's formulas is judged by
these counts before and after (the reports hold measured times; only the predictions change).

  scripts/model_stored.py [--build build] [--by collective|algorithm|size] [--ranks N]
                          [--save FILE] [--against FILE]

Reports of an older calibration (`calibration_version`, src/model/main.cc) are converted to what
it measures now, where the report can tell (--as-stored: priced as they are). --save keeps this
run's per-point ratios (predicted / measured) as JSON; --against FILE prints both runs' counts
per group and every choice whose verdict (within 10% or not) moved.
"""
import argparse, collections, json, os, signal, subprocess, sys, tempfile

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head: stop quietly

# What the calibration measures now (`calibration_version` in ringlet-model measure's reports);
# older reports are converted to it before they are priced (as_calibrated_now).
CALIBRATION_VERSION = 2
# Version 2: the one-way rate is a 1 MiB stream's time over 1 MiB and the pipeline's slice of fill
# (128 KiB) where ranks have cores of their own; before, over 1 MiB.
ONE_WAY_FILL = (1 << 20) / ((1 << 20) + (128 << 10))


def as_calibrated_now(report):
    """The report's parameters as this calibration would have stored them (where it can tell);
    whether any changed."""
    if report.get("calibration_version", 1) >= 2:
        return False

    def convert(m):
        if m.get("ranks_share_cores") or not m.get("beta_one_way_s_per_byte"):
            return False
        b1, beta = m["beta_one_way_s_per_byte"], m.get("beta_s_per_byte", 0)
        if beta > 0 and b1 >= beta:
            return False  # capped at beta: the stream's own rate is not in the report
        m["beta_one_way_s_per_byte"] = b1 * ONE_WAY_FILL
        # The one-way factors past the cache are measured over b1 (at least 1: where the report
        # has 1, what it was over the old b1 is not known).
        for key in ("one_way_memory_factor", "one_way_memory_mid_factor"):
            if m.get(key, 0) > 1:
                m[key] /= ONE_WAY_FILL
        return True

    changed = convert(report["model"])
    for row in report["rows"]:
        if "model" in row:
            changed = convert(row["model"]) or changed
    report["calibration_version"] = CALIBRATION_VERSION
    return changed


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stored_reports(tops):
    found = []
    for top in tops:
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith(".json"):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    with open(path) as f:
                        head = f.read(4096)
                except OSError:
                    continue
                if '"rows"' in head or '"predicted_s"' in head:
                    try:
                        d = json.load(open(path))
                    except ValueError:
                        continue
                    if isinstance(d, dict) and d.get("rows") and "predicted_s" in d["rows"][0]:
                        found.append(path)
    return sorted(found)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--by", choices=["collective", "algorithm", "size"], default="collective")
    p.add_argument("--ranks", type=int, default=0, help="only reports of this many ranks")
    p.add_argument("--reports", nargs="*", default=[os.path.join(ROOT, "bench/results"),
                                                     os.path.join(ROOT, "docs/data")],
                   help="folders to take the reports from (default: bench/results, docs/data)")
    p.add_argument("--under", default="", help="only reports whose path contains this")
    p.add_argument("--as-stored", action="store_true",
                   help="price every report with its parameters as stored (by default a report "
                        "of an older calibration is converted to what the calibration measures "
                        "now, where that can be told)")
    p.add_argument("--save", help="write the per-point ratios here (JSON)")
    p.add_argument("--against", help="a file written by --save to compare with")
    a = p.parse_args()
    tool = os.path.join(a.build, "bin", "ringlet-model")
    points = {}  # (report, collective, algorithm, bytes) -> predicted / measured
    choice = {}  # (report, collective, bytes) -> pick's measured / fastest measured
    ranks_of = {}
    converted = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(stored_reports(a.reports)):
            rel = os.path.relpath(path, os.path.commonpath(a.reports))
            if a.under not in rel:
                continue
            out = os.path.join(tmp, f"{i}.json")
            source = path
            report = json.load(open(path))
            if a.ranks and report.get("ranks") != a.ranks:
                continue
            if not a.as_stored:
                if as_calibrated_now(report):
                    converted += 1
                    source = os.path.join(tmp, f"{i}-now.json")
                    json.dump(report, open(source, "w"))
            r = subprocess.run([tool, "predict", source, "-o", out], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{os.path.relpath(path, ROOT)}: {r.stderr.strip()}", file=sys.stderr)
                continue
            d = json.load(open(out))
            ranks_of[rel] = d.get("ranks")
            by = collections.defaultdict(list)
            for row in d["rows"]:
                if row.get("measured_s", 0) <= 0:
                    continue
                by[(row["collective"], row["bytes"])].append(row)
                if row["bytes"] >= 64 << 10:
                    points[(rel, row["collective"], row["algorithm"], row["bytes"])] = (
                        row["predicted_s"] / row["measured_s"])
            for (c, b), rows in by.items():
                if len(rows) < 2 or b < 64 << 10:
                    continue
                pick = min(rows, key=lambda r: r["predicted_s"])
                best = min(rows, key=lambda r: r["measured_s"])
                choice[(rel, c, b)] = pick["measured_s"] / best["measured_s"]

    def group(key):
        rel, c, alg, b = key
        n = ranks_of[rel]
        if a.by == "collective":
            return (n, c)
        if a.by == "algorithm":
            return (n, c, alg)
        return (n, c, alg, b)

    def counts(pts):
        g = collections.defaultdict(lambda: [0, 0, []])
        for k, ratio in pts.items():
            e = g[group(k)]
            e[0] += abs(ratio - 1) <= 0.25
            e[1] += 1
            e[2].append(ratio)
        return g

    if a.save:
        json.dump({"points": [[*k, v] for k, v in points.items()],
                   "choice": [[*k, v] for k, v in choice.items()]}, open(a.save, "w"))
    within = sum(abs(r - 1) <= 0.25 for r in points.values())
    chosen = sum(r <= 1.10 for r in choice.values())
    print(f"{len(ranks_of)} reports: {within} of {len(points)} points within 25%, "
          f"the choice within 10% at {chosen} of {len(choice)} collective sizes"
          + (f" ({converted} of an older calibration converted)" if converted else ""))
    old = None
    if a.against:
        saved = json.load(open(a.against))
        old = {tuple(e[:-1]): e[-1] for e in saved["points"]}
        old_choice = {tuple(e[:-1]): e[-1] for e in saved["choice"]}
        common = [k for k in points if k in old]
        print(f"the saved run: {sum(abs(old[k] - 1) <= 0.25 for k in common)} of {len(common)} "
              f"points within 25%, the choice within 10% at "
              f"{sum(v <= 1.10 for k, v in old_choice.items() if k in choice)} of "
              f"{sum(1 for k in old_choice if k in choice)}")
        moved = collections.Counter()
        for (rel, c, b), r in choice.items():
            if (rel, c, b) in old_choice and (r <= 1.10) != (old_choice[(rel, c, b)] <= 1.10):
                moved[(ranks_of[rel], c, b, "better" if r <= 1.10 else "worse")] += 1
        for k, v in sorted(moved.items()):
            print(f"  choice {'now within' if k[3] == 'better' else 'no longer within'} 10%: "
                  f"ranks {k[0]} {k[1]} {k[2]} B in {v} reports")
    cur = counts(points)
    prev = counts({k: v for k, v in old.items() if k in points}) if old else None
    for g in sorted(cur):
        w, n, rs = cur[g]
        rs = sorted(rs)
        med = rs[len(rs) // 2]
        line = f"{' '.join(str(x) for x in g)}: {w} of {n} within 25%, median ratio {med:.2f}"
        if prev and g in prev:
            line += f" (saved: {prev[g][0]}, median {sorted(prev[g][2])[len(prev[g][2]) // 2]:.2f})"
        print(line)


if __name__ == "__main__":
    main()
