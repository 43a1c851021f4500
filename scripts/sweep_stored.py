#!/usr/bin/python3
"""Every stored in-turn sweep (bench/results/algo-sweep-*-bench.json.gz: ringlet-bench --vs-algos,
each algorithm forced in turns with the automatic choice in one process) priced again by this
build's model: for each op and size, the algorithm this build's formulas predict fastest under the
sweep's own cost model (`ringlet-model predict`), and its forced time over the fastest forced
time. Counts the picks within 1.10, per sweep and in all. Where model_stored.py judges the choice
on `ringlet-model measure` reports (each algorithm timed in its own rows, one after another),
this judges it on times taken in turns, which a slow spell of the machine moves alike.

  scripts/sweep_stored.py [--build build] [--ops "broadcast reduce"] [--ranks N] [-v]
                          [--sweeps FILE...]   (default: every stored sweep)

Only sizes from 1 byte where the sweep's own automatic run took one of the forced algorithms
count (below that the call rides in call headers, which no algorithm is forced into). -v lists every pick
(misses marked `!`).
"""
import argparse, collections, glob, gzip, json, os, signal, subprocess, sys, tempfile

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head: stop quietly

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WITHIN = 1.10


def predicted(model_bin, ranks, cost_model, rows):
    """(collective, bytes, algorithm) -> predicted seconds, from `ringlet-model predict`."""
    report = {"ranks": ranks, "links": "", "model": cost_model, "rows": rows}
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        with open(src, "w") as f:
            json.dump(report, f)
        run = subprocess.run([model_bin, "predict", src, "-o", out], capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"ringlet: ringlet-model predict failed: {run.stderr.strip()}")
        with open(out) as f:
            priced = json.load(f)
    # An algorithm the model does not price here (hierarchical on one host) comes back null.
    inf = float("inf")
    return {(r["collective"], r["bytes"], r["algorithm"]): r.get("predicted_s") or inf
            for r in priced["rows"]}


def choice(listed, forced, seconds, ranks):
    """The algorithm collectives::choose takes: the cheapest, on a tie the first listed, but
    recursive doubling at two ranks and the ring at more (collectives::beats)."""
    preferred = "recursive_doubling" if ranks == 2 else "ring"
    best, best_s = None, float("inf")
    for a in (a for a in listed if a in forced):
        s = seconds(a)
        tie = best is not None and best_s < float("inf") and abs(s - best_s) <= 1e-9 * max(s, best_s)
        if (tie and a == preferred) or (not tie and s < best_s):
            best, best_s = a, s
    return best or min(forced, key=seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ops", default="", help="only these ops (space-separated)")
    ap.add_argument("--ranks", type=int, default=0)
    ap.add_argument("-v", action="store_true", help="list every pick")
    ap.add_argument("--sweeps", nargs="*", help="ringlet-bench --vs-algos JSON(.gz) files")
    args = ap.parse_args()
    model_bin = os.path.join(args.build, "bin", "ringlet-model")
    if not os.access(model_bin, os.X_OK):
        sys.exit(f"ringlet: {model_bin} is not built (scripts/build.sh)")
    only = set(args.ops.split())
    # Each collective's algorithms in the order the choice tries them (ties go to the first).
    info = subprocess.run([os.path.join(args.build, "bin", "ringlet-info"), "--json"],
                          capture_output=True, text=True)
    if info.returncode != 0:
        sys.exit(f"ringlet: ringlet-info --json failed: {info.stderr.strip()}")
    order = json.loads(info.stdout)["algorithms"]
    total = collections.Counter()
    paths = args.sweeps or sorted(
        glob.glob(os.path.join(ROOT, "bench/results/algo-sweep-*-bench.json.gz")))
    for path in paths:
        with (gzip.open(path) if path.endswith(".gz") else open(path)) as f:
            sweep = json.load(f)
        config = sweep.get("config", {})
        ranks = config.get("world_size", 0)
        cost_model = config.get("cost_model")
        if not cost_model or (args.ranks and ranks != args.ranks):
            continue
        forced, rows = {}, []
        for r in sweep.get("results", []):
            op, size, algos = r.get("op"), r.get("size"), r.get("algos") or {}
            if (only and op not in only) or len(algos) < 2 or r.get("algorithm") not in algos:
                continue
            if not size:  # zero bytes: the forced runs differ by their messages alone
                continue
            forced[(op, size)] = {a: v["time_us"] for a, v in algos.items()}
            rows += [{"collective": op, "algorithm": a, "bytes": size} for a in algos]
        if not rows:
            continue
        try:
            price = predicted(model_bin, ranks, cost_model, rows)
        except SystemExit as e:
            print(f"{os.path.basename(path)}: skipped ({e})", file=sys.stderr)
            continue
        counts = collections.Counter()
        for (op, size), times in sorted(forced.items()):
            pick = choice(order.get(op, sorted(times)), times, lambda a: price[(op, size, a)], ranks)
            ratio = times[pick] / min(times.values())
            counts[(op, ratio <= WITHIN)] += 1
            if args.v:
                mark = " !" if ratio > WITHIN else ""
                print(f"  pick: {os.path.basename(path)} {op} {size} {pick} {ratio:.2f}{mark}")
        name = os.path.basename(path).removesuffix(".gz").removesuffix(".json")
        name = name.removesuffix("-bench")
        ok = sum(c for (op, good), c in counts.items() if good)
        print(f"{name} (N={ranks}): {ok} of {sum(counts.values())} picks within {WITHIN:.2f}")
        total.update(counts)
    ops = sorted({op for op, _ in total})
    for op in ops:
        print(f"{op}: {total[(op, True)]} of {total[(op, True)] + total[(op, False)]}")
    print(f"all: {sum(c for (op, good), c in total.items() if good)} of {sum(total.values())}")


if __name__ == "__main__":
    main()
