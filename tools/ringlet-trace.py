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
created (otherData.clock_offset_to_rank0_ns, within clock_offset_uncertainty_ns), or by the
hosts' wall clocks for files without offsets (as good as NTP). Clocks drift apart over a long
run (tens of microseconds per second); the steps' messages between hosts show it (a receive
cannot end before its send began), and where there are 16 or more each way over a second or
more, merge fits each host's offset as a line to them (needs scipy) and uses it instead of the
measured constant offset where that one breaks a message's bound by more than its uncertainty
and the two agree at the start. The merged file's otherData.clock says which,
otherData.clock_hosts how each host was placed and why, and merge prints both.
"""
import argparse
import collections
import dataclasses
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


# Drift correction (fit_drift): how many matched messages a host needs each way, over how long,
# and the largest rate taken for a clock's. Quartz clocks that no NTP disciplines drift by tens
# of ppm and NTP slews by at most 500; a steeper fit means messages were paired wrongly.
MIN_MESSAGES = 16
MIN_SPAN_S = 1.0
MAX_DRIFT_PPM = 500.0


@dataclasses.dataclass(frozen=True)
class Shift:
    """What to add to a time t (us, its rank's steady clock) to put it on the merged clock:
    offset_us at at_us, and ppm microseconds more for every second after it."""
    offset_us: float
    ppm: float = 0.0
    at_us: float = 0.0

    def __call__(self, t):
        return self.offset_us + self.ppm * 1e-6 * (t - self.at_us)


def cross_host_messages(files, hosts):
    """The messages between hosts that the step events show: (sender's host, the start of its
    step, receiver's host, the end of its step), each time on its own host's clock.

    A step that sends to a peer (args.to) belongs with the peer's step that receives from this
    rank (args.from) in the same call (args.call, numbered alike on every rank), chunk and slice;
    one event may send and receive. The same chunk can cross a link twice in a call (a ring's
    reduce-scatter, then its all-gather), so the k-th such send pairs with the k-th such receive
    in order of start: a link delivers in order. Where the two sides count differently nothing
    of that group is paired. The send began after its step started, the receive finished before
    its step ended, so each pair gives a true bound, only looser than the message itself."""
    host_of = {d["otherData"]["rank"]: h for d, h in zip(files, hosts)}
    sends, receives = collections.defaultdict(list), collections.defaultdict(list)
    for data in files:
        me = data["otherData"]["rank"]
        for e in data["traceEvents"]:
            if e.get("cat") != "step":
                continue
            a = e["args"]
            where = (a["call"], a["chunk"], a["slice"])
            if a["to"] >= 0 and host_of.get(a["to"], host_of[me]) != host_of[me]:
                sends[(me, a["to"], *where)].append(e["ts"])
            if a["from"] >= 0 and host_of.get(a["from"], host_of[me]) != host_of[me]:
                receives[(a["from"], me, *where)].append((e["ts"], e["ts"] + e["dur"]))
    messages = []
    for key, starts in sends.items():
        ends = receives.get(key, [])
        if len(ends) != len(starts):
            continue
        for sent, (_, received) in zip(sorted(starts), sorted(ends)):
            messages.append((host_of[key[0]], sent, host_of[key[1]], received))
    return messages


def convex_hull(points, below):
    """The vertices of the lower (below=True) or upper convex hull of (t, y) points, by t: the
    only points that can stop a line lying below (above) them all."""
    hull = []
    for p in sorted(points):
        while len(hull) >= 2:
            (t0, y0), (t1, y1) = hull[-2], hull[-1]
            turn = (t1 - t0) * (p[1] - y0) - (y1 - y0) * (p[0] - t0)
            if (turn > 0) == below:
                break
            hull.pop()
        hull.append(p)
    return hull


def fit_drift(upper, lower, start_us, measured_us, uncertainty_us):
    """A host's offset to rank 0's clock as a line, offset(t) = a + b * t, from the bounds that
    messages put on it, or the reason to keep the measured constant offset.

    `upper` holds (t, u) for messages this host sent: the receive finished at or after the send
    began, so offset(t) <= u at the send's time t (this host's clock). `lower` holds (t, l) for
    messages it received: offset(t) >= l. The true offset runs between the two sets of points,
    and so must the line; only the lower hull of the upper points and the upper hull of the lower
    ones can stop it (the convex-hull method of trace clock synchronisation). Of the lines that
    fit, the one kept stays farthest from both, at least `margin` from every bound (a small
    linear program in a, b and margin): the middle of the band, which is right when the quickest
    messages take as long each way, and wrong by at most the margin otherwise, as Cristian's
    estimate at creation is wrong by at most half its round trip.

    The line is used only when the messages show a drift, the measured constant offset breaking
    some bound by more than its uncertainty (a message would arrive before it was sent), and the
    line agrees with the measured offset at the start (start_us, the host's first event) within
    the two's uncertainties. Where the constant breaks nothing it stays: the centre line's slope
    is only as sure as the band's width over the run, and a wrong one would move the last events
    more than a constant offset that is still right. A fit that contradicts the measured offset at
    the start means one of the two is wrong."""
    if len(upper) < MIN_MESSAGES or len(lower) < MIN_MESSAGES:
        return None, (f"too few messages ({len(upper)} sent, {len(lower)} received; "
                      f"{MIN_MESSAGES} each way needed)")
    times = [t for t, _ in upper + lower]
    span_s = (max(times) - min(times)) * 1e-6
    if span_s < MIN_SPAN_S:
        return None, f"messages span {span_s:.2f} s, under {MIN_SPAN_S:g} s"
    broken = max([measured_us - u for _, u in upper] + [l - measured_us for _, l in lower])
    if broken <= uncertainty_us:
        return None, (f"no drift shown: the measured offset breaks no message's bound by more "
                      f"than its uncertainty (at worst {broken:+.1f} us, against "
                      f"{uncertainty_us:.1f} us)")
    try:
        from scipy.optimize import linprog
    except ImportError:
        return None, "no scipy (Debian: apt-get install python3-scipy)"
    sent, received = len(upper), len(lower)
    # Seconds from the middle of the run keep the program well scaled; b is then in us per s.
    middle = (max(times) + min(times)) / 2
    upper = [((t - middle) * 1e-6, u) for t, u in convex_hull(upper, below=True)]
    lower = [((t - middle) * 1e-6, l) for t, l in convex_hull(lower, below=False)]
    # Variables a, b, margin; maximise margin: a + b t + margin <= u, -(a + b t) + margin <= -l.
    rows = [[1.0, t, 1.0] for t, _ in upper] + [[-1.0, -t, 1.0] for t, _ in lower]
    limits = [u for _, u in upper] + [-l for _, l in lower]
    result = linprog([0.0, 0.0, -1.0], A_ub=rows, b_ub=limits, method="highs",
                     bounds=[(None, None), (-MAX_DRIFT_PPM, MAX_DRIFT_PPM), (None, None)])
    if result.status != 0:
        return None, f"no fit ({result.message})"
    a, ppm, margin = result.x
    if margin < 0:
        return None, f"no line satisfies every message (short by {-margin:.1f} us)"
    if abs(ppm) >= MAX_DRIFT_PPM * 0.999:
        return None, f"fitted drift beyond {MAX_DRIFT_PPM:g} ppm: not a clock's"
    line = Shift(a, ppm, middle)
    tolerance = uncertainty_us + margin
    at_start = line(start_us) - measured_us
    if abs(at_start) > tolerance:
        return None, (f"fit {at_start:+.1f} us from the measured offset at the start "
                      f"(more than {tolerance:.1f} us)")
    return line, (f"{ppm:+.2f} ppm from {sent} messages sent and {received} received over "
                  f"{span_s:.1f} s, margin {margin:.1f} us; the measured offset broke a bound by "
                  f"{broken:.1f} us")


def exchange_line(offsets):
    """A host's offset to rank 0's clock as a line through the clock exchanges its rank made
    (otherData.clock_offsets: at_ns on this rank's clock, offset_ns, uncertainty_ns), or None and
    why. The exchange runs at creation and again after calls 2^10 - 1, 2^11 - 1, ..., so a long
    run has one at least halfway through it. Each is right within its uncertainty: the line is a
    least-squares fit weighted by those, kept where its slope is larger than the first and last
    measurements' uncertainties allow over the time between them (else a drift cannot be told
    from their error, and the first offset stays)."""
    if len(offsets) < 2:
        return None, ""  # one exchange (a run of fewer than 1024 calls, or an older file)
    t = [o["at_ns"] / 1000.0 for o in offsets]
    y = [o["offset_ns"] / 1000.0 for o in offsets]
    w = [1.0 / max(o["uncertainty_ns"] / 1000.0, 0.001) ** 2 for o in offsets]
    span_us = t[-1] - t[0]
    if span_us <= 0:
        return None, "clock exchanges at one time"
    mean_t = sum(wi * ti for wi, ti in zip(w, t)) / sum(w)
    mean_y = sum(wi * yi for wi, yi in zip(w, y)) / sum(w)
    slope = (sum(wi * (ti - mean_t) * (yi - mean_y) for wi, ti, yi in zip(w, t, y)) /
             sum(wi * (ti - mean_t) ** 2 for wi, ti in zip(w, t)))
    bound = (offsets[0]["uncertainty_ns"] + offsets[-1]["uncertainty_ns"]) / 1000.0 / span_us
    what = (f"{len(offsets)} clock exchanges over {span_us * 1e-6:.1f} s: {slope * 1e6:+.2f} ppm "
            f"(+-{bound * 1e6:.2f})")
    if abs(slope) <= bound:
        return None, f"no drift shown by {what}"
    return Shift(mean_y, slope * 1e6, mean_t), what


def clock_shifts(files):
    """Per file, the Shift that puts its times on one clock; that clock's name; and per host
    (across hosts with measured offsets) how it was placed.

    Ranks of one host share its monotonic clock: on one host every file is kept as it is, and
    across hosts the ranks of a host move together. When every file carries the offset that the
    clock exchange at creation measured (clock_offset_to_rank0_ns: rank 0's steady time minus
    this rank's), each host is moved onto rank 0's clock by its rank's with the smallest
    uncertainty (rank 0's host: not at all), and where its clock drifted from rank 0's during
    the run, by a line instead: through that rank's later clock exchanges (exchange_line), else
    fitted to the messages between the hosts where they show the drift (drift_shifts).
    Otherwise hosts are aligned by the difference between their monotonic and wall clocks (as
    good as the hosts' wall clocks agree)."""
    hosts = [d["otherData"].get("host", "") for d in files]
    if len(set(hosts)) == 1:
        return [Shift(0.0)] * len(files), "one host: monotonic", {}
    if all("clock_offset_to_rank0_ns" in d["otherData"] for d in files):
        best = {}  # host -> (rank 0 first, uncertainty, offset, file), the least of its ranks'
        for i, (data, host) in enumerate(zip(files, hosts)):
            o = data["otherData"]
            mine = (o["rank"] != 0, o["clock_offset_uncertainty_ns"],
                    o["clock_offset_to_rank0_ns"], i)
            best[host] = min(best.get(host, mine), mine)
        worst = max(uncertainty for _, uncertainty, _, _ in best.values())
        measured = {h: (offset / 1000.0, uncertainty / 1000.0)
                    for h, (_, uncertainty, offset, _) in best.items()}
        reference = next((h for h, (not_zero, _, _, _) in best.items() if not not_zero), None)
        exchanged, exchange_notes = {}, {}
        for host, (_, _, _, i) in best.items():
            if host != reference:
                line, exchange_notes[host] = exchange_line(
                    files[i]["otherData"].get("clock_offsets", []))
                if line is not None:
                    exchanged[host] = line
        placed, notes = drift_shifts(files, hosts, reference, measured, exchanged)
        for host, note in exchange_notes.items():  # the exchanges' verdict first
            if note:
                later = notes.get(host) if host not in exchanged else None
                notes[host] = f"{note}; {later}" if later else note
        ranks = collections.defaultdict(list)
        for data, host in zip(files, hosts):
            ranks[host].append(data["otherData"]["rank"])
        report = {}
        for host in best:
            if host == reference:
                continue
            shift = placed.get(host, Shift(measured[host][0]))
            method = ("clock exchanges" if host in exchanged else
                      "drift fit" if host in placed else "constant offset")
            report[host] = {"ranks": sorted(ranks[host]),
                            "method": method,
                            "offset_us": round(shift(shift.at_us), 3),
                            "at_us": round(shift.at_us, 3), "ppm": round(shift.ppm, 3),
                            "why": notes.get(host, "")}
        fitted = [placed[h].ppm for h in report if h in placed]
        clock = f"measured offsets to rank 0 (max uncertainty {worst / 1000.0:.1f} us)"
        clock += (f", drift fitted for {len(fitted)} of {len(report)} hosts (max "
                  f"{max(abs(p) for p in fitted):.1f} ppm)" if fitted else ", constant")
        return ([placed.get(h, Shift(measured[h][0])) for h in hosts], clock, report)
    # steady + (system - steady) = wall time; the first file's steady clock is the reference.
    base = files[0]["otherData"]
    ref = base["system_ns"] - base["steady_ns"]
    return ([Shift((d["otherData"]["system_ns"] - d["otherData"]["steady_ns"] - ref) / 1000.0)
             for d in files], "wall clocks of the hosts", {})


def drift_shifts(files, hosts, reference, measured, exchanged=None):
    """The hosts whose drift against rank 0's clock the messages show, each with its fitted
    Shift, and per host why it was (not) fitted.

    Rank 0's host (`reference`) is placed as it is. A host is fitted to its messages with placed
    hosts, whose times the placed Shift converts to rank 0's clock, so a host that talks only to
    a fitted one is fitted in a later round. `measured` holds each host's offset and uncertainty
    from the clock exchange (us), against which fit_drift checks the line."""
    if reference is None:
        return {}, {}
    first = {}  # host -> its first event, on its clock
    for data, host in zip(files, hosts):
        times = [e["ts"] for e in data["traceEvents"] if "ts" in e]
        if times:
            first[host] = min(first.get(host, times[0]), min(times))
    sent, received = collections.defaultdict(list), collections.defaultdict(list)
    for message in cross_host_messages(files, hosts):
        sent[message[0]].append(message)
        received[message[2]].append(message)
    # Hosts whose clock exchanges already place them (exchange_line) are not fitted again; the
    # messages of the others with them count.
    placed, notes, given_up = {reference: Shift(0.0), **(exchanged or {})}, {}, set()
    waiting = [h for h in dict.fromkeys(hosts) if h != reference and h in first]
    progress = True
    while progress:
        progress = False
        for host in waiting:
            if host in placed or host in given_up:
                continue
            # In rank 0's time a receive ends no earlier than its send began:
            # sent + offset(sent) <= received + peer's shift(received), and the other way round.
            upper = [(s, e + placed[to](e) - s) for _, s, to, e in sent[host] if to in placed]
            lower = [(e, s + placed[frm](s) - e) for frm, s, _, e in received[host]
                     if frm in placed]
            line, notes[host] = fit_drift(upper, lower, first[host], *measured[host])
            if line is not None:
                placed[host] = line
                progress = True
            elif min(len(upper), len(lower)) >= MIN_MESSAGES:
                given_up.add(host)  # more placed peers would not change the verdict
    del placed[reference]
    return placed, notes


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
    shifts, clock, hosts = clock_shifts(files)
    events, first = [], {}
    for data, shift, rank in zip(files, shifts, ranks):
        for e in data["traceEvents"]:
            e = dict(e)
            if "ts" in e:
                first[rank] = min(first.get(rank, e["ts"]), e["ts"])
                # A drifting clock's microseconds are longer or shorter than rank 0's too.
                if "dur" in e and shift.ppm:
                    e["dur"] = round(e["dur"] * (1 + shift.ppm * 1e-6), 3)
                e["ts"] = e["ts"] + shift(e["ts"])
            events.append(e)
    start = min((e["ts"] for e in events if "ts" in e), default=0.0)
    for e in events:
        if "ts" in e:
            e["ts"] = round(e["ts"] - start, 3)
    size = max(d["otherData"].get("size", 0) for d in files)
    other = {
        "ringlet_trace": 1,
        "merged_ranks": sorted(ranks),
        "size": size,
        "clock": clock,
        # What each rank's first event was moved by (with a drift fit, later ones move more).
        "clock_shift_us": {str(r): round(s(first.get(r, s.at_us)), 3)
                           for r, s in zip(ranks, shifts)},
        "start_us": start,
    }
    if hosts:
        other["clock_hosts"] = hosts
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


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
        other = merged["otherData"]
        print(f"clock: {other['clock']}")
        for host, placed in other.get("clock_hosts", {}).items():
            ranks = ", ".join(str(r) for r in placed["ranks"])
            print(f"  {host} (ranks {ranks}): {placed['method']}, {placed['why']}")
    elif args.command == "show":
        show(events_of(args.files), args.call, args.seq, args.fastest, args.bytes)
    else:
        plot(events_of(args.files), args.call, args.seq, args.fastest, args.bytes, args.out,
             args.title)


if __name__ == "__main__":
    main()
