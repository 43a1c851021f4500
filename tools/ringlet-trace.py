#!/usr/bin/python3
"""ringlet-trace: join and draw the files that RINGLET_TRACE writes (one per rank).

  ringlet-trace merge t.rank*.json -o merged.json   one file, every rank on one clock
  ringlet-trace show merged.json [--call allreduce]  the steps of one call, rank by rank
  ringlet-trace plot merged.json -o ring.png         a timeline: one lane per rank, each step a
                                                     bar coloured by the chunk it moves

Each input is a Chrome trace-event JSON (Perfetto, chrome://tracing) as ringlet writes it; plot
and show also take the ranks' files directly. Plotting needs matplotlib (Debian:
apt-get install python3-matplotlib, then run with /usr/bin/python3).

The one clock: on one host, the monotonic clock its ranks share; across hosts, rank 0's, each
host moved by the offset its ranks measured against rank 0's clock when the communicator was
created (otherData.clock_offset_to_rank0_ns, within clock_offset_uncertainty_ns; measured once,
so drift over a long run is not corrected), or by the hosts' wall clocks for files without
offsets (as good as NTP). The merged file's otherData.clock says which.
"""
import argparse
import json
import sys


def fail(message):
    print(f"ringlet: {message}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{path} is not JSON: {e}")
    if not isinstance(data, dict) or "traceEvents" not in data:
        fail(f"{path} is not a trace-event file (no traceEvents)")
    return data


def clock_shifts(files):
    """Per file, the microseconds to add to its times to put them on one clock, and that clock's
    name.

    Ranks of one host share its monotonic clock: on one host every file is kept as it is. Across
    hosts, when every file carries the offset that the clock exchange at creation measured
    (clock_offset_to_rank0_ns: rank 0's steady time minus this rank's), each host is moved onto
    rank 0's clock by one shift, its rank's with the smallest uncertainty (rank 0's host: none),
    so the ranks of a host keep their shared clock. Otherwise hosts are aligned by the difference
    between their monotonic and wall clocks (as good as the hosts' wall clocks agree)."""
    hosts = [d["otherData"].get("host", "") for d in files]
    if len(set(hosts)) == 1:
        return [0.0] * len(files), "one host: monotonic"
    if all("clock_offset_to_rank0_ns" in d["otherData"] for d in files):
        best = {}  # host -> (rank 0 first, uncertainty, offset), the least of its ranks'
        for data, host in zip(files, hosts):
            o = data["otherData"]
            mine = (o["rank"] != 0, o["clock_offset_uncertainty_ns"],
                    o["clock_offset_to_rank0_ns"])
            best[host] = min(best.get(host, mine), mine)
        worst = max(uncertainty for _, uncertainty, _ in best.values())
        return ([best[h][2] / 1000.0 for h in hosts],
                f"measured offsets to rank 0 (max uncertainty {worst / 1000.0:.1f} us)")
    # steady + (system - steady) = wall time; the first file's steady clock is the reference.
    base = files[0]["otherData"]
    ref = base["system_ns"] - base["steady_ns"]
    return ([(d["otherData"]["system_ns"] - d["otherData"]["steady_ns"] - ref) / 1000.0
             for d in files], "wall clocks of the hosts")


def merge(paths):
    """Every rank's events on one clock (clock_shifts), starting at 0."""
    files = [load(p) for p in paths]
    ranks = []
    for path, data in zip(paths, files):
        other = data.get("otherData", {})
        if "merged_ranks" in other:
            fail(f"{path} is already merged; merge the ranks' own files")
        if "rank" not in other:
            fail(f"{path} has no otherData.rank: not written by RINGLET_TRACE")
        ranks.append(other["rank"])
    if len(set(ranks)) != len(ranks):
        fail(f"rank files repeat a rank: {sorted(ranks)}")
    shifts, clock = clock_shifts(files)
    events = []
    for data, shift in zip(files, shifts):
        for e in data["traceEvents"]:
            e = dict(e)
            if "ts" in e:
                e["ts"] = e["ts"] + shift
            events.append(e)
    start = min((e["ts"] for e in events if "ts" in e), default=0.0)
    for e in events:
        if "ts" in e:
            e["ts"] = round(e["ts"] - start, 3)
    size = max(d["otherData"].get("size", 0) for d in files)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "ringlet_trace": 1,
            "merged_ranks": sorted(ranks),
            "size": size,
            "clock": clock,
            "clock_shift_us": {str(r): shift for r, shift in zip(ranks, shifts)},
            "start_us": start,
        },
    }


def events_of(paths):
    if len(paths) == 1:
        data = load(paths[0])
        if "merged_ranks" in data.get("otherData", {}):
            return data
    return merge(paths)


def pick_call(trace, name, seq, fastest=False, size=None):
    """The collective events (one per rank) of the chosen call and their steps: the last call
    named `name` (of `size` bytes, if given), the one with sequence number `seq`, or with
    `fastest` the one that took the least time from the first rank's start to the last rank's
    end (among the largest calls unless `size` is given)."""
    calls = [e for e in trace["traceEvents"] if e.get("cat") == "collective"]
    named = [e for e in calls if e["name"].startswith(name)]
    if not named:
        known = sorted({e["name"].split("(")[0] for e in calls})
        fail(f"no call named {name} in the trace (it has: {', '.join(known) or 'none'})")
    if seq is not None:
        named = [e for e in named if e["args"]["seq"] == seq]
        if not named:
            fail(f"no {name} call with seq {seq} in the trace")
    if size is not None:
        named = [e for e in named if e["args"]["bytes"] == size]
        if not named:
            fail(f"no {name} call of {size} bytes in the trace")
    elif fastest:
        # The fastest of the largest calls, not a small one made on the side.
        largest = max(e["args"]["bytes"] for e in named)
        named = [e for e in named if e["args"]["bytes"] == largest]
    # Calls are numbered alike on every rank ("call"); sequence numbers restart after create().
    index = max(e["args"]["call"] for e in named)
    if fastest:
        spans = {}
        for e in named:
            first, last = spans.get(e["args"]["call"], (e["ts"], e["ts"] + e["dur"]))
            spans[e["args"]["call"]] = (min(first, e["ts"]), max(last, e["ts"] + e["dur"]))
        index = min(spans, key=lambda i: spans[i][1] - spans[i][0])
    chosen = [e for e in named if e["args"]["call"] == index]
    steps = [e for e in trace["traceEvents"]
             if e.get("cat") == "step" and e["args"]["call"] == index]
    return chosen, steps


def show(trace, name, seq, fastest, size):
    calls, steps = pick_call(trace, name, seq, fastest, size)
    first = calls[0]
    print(f"{first['name']}, {first['args']['algorithm']}, seq {first['args']['seq']}")
    for call in sorted(calls, key=lambda e: e["pid"]):
        rank = call["pid"]
        mine = sorted((s for s in steps if s["pid"] == rank), key=lambda s: s["ts"])
        print(f"rank {rank}: {call['dur']:.1f} us, {len(mine)} steps")
        for i, s in enumerate(mine):
            a = s["args"]
            moves = []
            if a["from"] >= 0:
                moves.append(f"from {a['from']}" + (" +reduce" if a["reduces"] else ""))
            if a["to"] >= 0:
                moves.append(f"to {a['to']}")
            chunk = f"chunk {a['chunk']}" if a["chunk"] >= 0 else "data"
            piece = f" slice {a['slice']}" if a["slice"] > 0 else ""
            print(f"  {i:3d} {s['ts'] - call['ts']:10.1f} us {s['dur']:9.1f} us  "
                  f"{s['name']:<19} {chunk}{piece}, {a['bytes']} B {', '.join(moves)}")


def plot(trace, name, seq, fastest, size, out, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        fail("plot needs matplotlib (Debian: apt-get install python3-matplotlib, then run "
             "ringlet-trace with /usr/bin/python3)")
    calls, steps = pick_call(trace, name, seq, fastest, size)
    t0 = min(c["ts"] for c in calls)
    t1 = max(c["ts"] + c["dur"] for c in calls)
    ranks = sorted(c["pid"] for c in calls)
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(11, 1.0 + 0.7 * len(ranks)))
    gathering = {"recvCopySend", "recv"}
    for call in calls:
        lane = call["pid"]
        ax.barh(lane, call["dur"], left=call["ts"] - t0, height=0.9, color="#eeeeee",
                edgecolor="#999999", linewidth=0.5, zorder=1)
    for s in steps:
        a = s["args"]
        chunk = a["chunk"]
        colour = colours(chunk % 10) if chunk >= 0 else "#888888"
        gather = s["name"] in gathering
        ax.barh(s["pid"], max(s["dur"], (t1 - t0) * 0.002), left=s["ts"] - t0, height=0.6,
                color=colour, edgecolor="black", linewidth=0.3, hatch="///" if gather else None,
                alpha=0.75 if gather else 1.0, zorder=2)
        if chunk >= 0 and s["dur"] > (t1 - t0) * 0.035:
            ax.text(s["ts"] - t0 + s["dur"] / 2, s["pid"], str(chunk), ha="center",
                    va="center", fontsize=8, zorder=3)
    ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlim(0, t1 - t0)
    ax.set_xlabel("microseconds since the first rank entered the call")
    first = calls[0]
    size = first["args"]["bytes"]
    human = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1024 \
        else f"{size} B"
    ax.set_title(title or f"{first['name']} of {human} ({first['args']['algorithm']}), "
                 f"{len(ranks)} ranks: bars are steps, coloured by chunk")
    chunks = sorted({s["args"]["chunk"] for s in steps if s["args"]["chunk"] >= 0})
    handles = [Patch(color=colours(c % 10), label=f"chunk {c}") for c in chunks]
    handles.append(Patch(facecolor="white", edgecolor="black", label="reduce-scatter (solid)"))
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                         label="all-gather (hatched)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    parser = argparse.ArgumentParser(prog="ringlet-trace", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="join the ranks' files on one clock")
    m.add_argument("files", nargs="+")
    m.add_argument("-o", "--out", required=True)
    for command in ("show", "plot"):
        p = sub.add_parser(command, help="the steps of one call" if command == "show"
                           else "draw one call as a timeline PNG")
        p.add_argument("files", nargs="+", help="a merged file, or the ranks' files")
        p.add_argument("--call", default="allreduce", help="which collective (default allreduce)")
        p.add_argument("--seq", type=int, help="its sequence number (default: the last one)")
        p.add_argument("--fastest", action="store_true",
                       help="of the calls so named, the one that took the least time")
        p.add_argument("--bytes", type=int, help="only calls of this size")
        if command == "plot":
            p.add_argument("-o", "--out", required=True)
            p.add_argument("--title")
    args = parser.parse_args()
    if args.command == "merge":
        merged = merge(args.files)
        try:
            with open(args.out, "w") as f:
                json.dump(merged, f)
        except OSError as e:
            fail(f"cannot write {args.out}: {e.strerror}")
        print(f"merged {len(args.files)} ranks into {args.out}")
    elif args.command == "show":
        show(events_of(args.files), args.call, args.seq, args.fastest, args.bytes)
    else:
        plot(events_of(args.files), args.call, args.seq, args.fastest, args.bytes, args.out,
             args.title)


if __name__ == "__main__":
    main()
