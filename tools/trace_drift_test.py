#!/usr/bin/python3
"""ringlet-trace merge across two hosts whose clocks drift apart, on made-up trace files whose true
times are known. Usage: trace_drift_test.py RINGLET_TRACE (the tool; run with /usr/bin/python3).

Four ranks run a ring all-reduce: 0 and 1 on host "a" (rank 0's clock, the truth), 2 and 3 on
host "b", whose clock is 3.7 s ahead at the start and gains `ppm` parts per million. Every call's
2N-1 steps are simulated rank by rank: a step receives the chunk its predecessor sent in the step
before (waiting for it), works 2-6 us, and sends it on; a message takes 0.5 us and more within a
host, 18 us and more from a to b and 22 us and more back (unequal on purpose). Each host's
ranks then write their times on their own clock, with the offset that the clock exchange at
creation would have measured (1.5 us off, +-4.7 us). Merged, every event of host b must land
within TOLERANCE_US of its true time when the drift is fitted."""
import json
import os
import random
import subprocess
import sys
import tempfile

N = 4
HOSTS = ["a", "a", "b", "b"]
B_AHEAD_US = 3.7e6
START_US = 5e9  # host a's steady clock when the communicator was created
MEASURED_ERROR_US = 1.5
UNCERTAINTY_US = 4.7
TOLERANCE_US = 5.0
NAMES = ["send", "recvReduceSend", "recvReduceSend", "recvReduceCopySend", "recvCopySend",
         "recvCopySend", "recv"]  # the ring at N = 4, step by step (docs/ring-allreduce.md)


def local(rank, true_us, ppm):
    """Rank's steady clock at true time (host a's clock)."""
    if HOSTS[rank] == "a":
        return true_us
    return true_us + B_AHEAD_US + ppm * 1e-6 * (true_us - START_US)


def latency(rng, sender, receiver):
    if HOSTS[sender] == HOSTS[receiver]:
        return 0.5 + rng.expovariate(1 / 0.3)
    return (18.0 if HOSTS[sender] == "a" else 22.0) + rng.expovariate(1 / 6.0)


def simulate(calls, span_s, ppm, seed=1):
    """Per rank its events (times on its clock), and per event (rank, cat, call, name, chunk) its
    true start."""
    rng = random.Random(seed)
    events = [[] for _ in range(N)]
    truth = {}

    def record(rank, cat, name, start, end, args):
        t0, t1 = local(rank, start, ppm), local(rank, end, ppm)
        events[rank].append({"name": name, "cat": cat, "ph": "X", "pid": rank,
                             "tid": 0 if cat == "collective" else 1, "ts": round(t0, 3),
                             "dur": round(t1 - t0, 3), "args": args})
        truth[(rank, cat, args["call"], name, args.get("chunk"))] = start

    for call in range(calls):
        begin = START_US + 1000 + call * span_s * 1e6 / max(calls - 1, 1)
        ready = [begin + rng.uniform(0, 20) for _ in range(N)]
        entered = list(ready)
        arrival = {}  # (sender, step) -> when its message arrived at the next rank
        for k in range(2 * N - 1):
            for r in range(N):
                nxt, prev = (r + 1) % N, (r - 1) % N
                start = ready[r]
                end = (start if k == 0 else max(start, arrival[(prev, k - 1)])) + \
                    rng.uniform(2, 6)
                if k < 2 * N - 2:
                    arrival[(r, k)] = end + latency(rng, r, nxt)
                    end += 0.5
                ready[r] = end
                chunk = (r - k) % N
                record(r, "step", NAMES[k], start, end,
                       {"call": call, "seq": call + 1, "chunk": chunk, "slice": 0,
                        "to": nxt if k < 2 * N - 2 else -1, "from": prev if k > 0 else -1,
                        "offset": chunk * 1024, "bytes": 1024, "reduces": 0 < k < N})
        for r in range(N):
            record(r, "collective", "allreduce", entered[r], ready[r],
                   {"call": call, "seq": call + 1, "algorithm": "ring", "bytes": 4096})
    return events, truth


def exchanges_of(rank, ppm, times_s):
    """The clock exchanges a rank of host b would list at `times_s` after creation (true time):
    offset to rank 0's clock as measured, alternately 1.5 us above and below the truth, within
    +-4.7 us."""
    out = []
    for i, t_s in enumerate(times_s):
        true = START_US + t_s * 1e6
        error = MEASURED_ERROR_US * (1 if i % 2 == 0 else -1)
        out.append({"at_ns": round(local(rank, true, ppm) * 1000),
                    "offset_ns": round((true - local(rank, true, ppm) + error) * 1000),
                    "uncertainty_ns": round(UNCERTAINTY_US * 1000), "samples": 32})
    return out


def write(directory, events, ppm, measured_error_us=MEASURED_ERROR_US, exchanges_s=None,
          one_way=False):
    paths = []
    for r in range(N):
        if r == 0:
            offset_ns, uncertainty_ns, samples = 0, 0, 0
        elif HOSTS[r] == "a":
            offset_ns, uncertainty_ns, samples = 40, 90, 32
        else:  # rank 0's clock minus this one's at creation, as measured
            true_offset = START_US - local(r, START_US, ppm)
            offset_ns = round((true_offset + measured_error_us) * 1000)
            uncertainty_ns, samples = round(UNCERTAINTY_US * 1000) + 1000 * (r - 2), 32
        end = max(e["ts"] + e["dur"] for e in events[r])
        mine = events[r]
        if one_way and HOSTS[r] == "b":
            # Messages only from a to b: host b's sends (to rank 0) are left out of its steps.
            mine = [e for e in mine if not (e["cat"] == "step" and e["args"]["to"] == 0)]
        data = {"traceEvents": mine, "displayTimeUnit": "ns",
                "otherData": {"ringlet_trace": 1, "rank": r, "size": N, "host": HOSTS[r],
                              "clock": "steady", "steady_ns": round(end * 1000),
                              "system_ns": round(1.7e18 + end * 1000), "dropped": 0,
                              "clock_offset_to_rank0_ns": offset_ns,
                              "clock_offset_uncertainty_ns": uncertainty_ns,
                              "clock_offset_samples": samples}}
        if exchanges_s is not None:
            listed = (exchanges_of(r, ppm, exchanges_s) if HOSTS[r] == "b" else
                      [{"at_ns": round(local(r, START_US + t * 1e6, ppm) * 1000),
                        "offset_ns": offset_ns, "uncertainty_ns": uncertainty_ns,
                        "samples": samples} for t in exchanges_s])
            if HOSTS[r] == "b":
                listed[0]["offset_ns"] = offset_ns
                listed[0]["uncertainty_ns"] = uncertainty_ns
            data["otherData"]["clock_offsets"] = listed
        paths.append(os.path.join(directory, f"t.rank{r}.json"))
        with open(paths[-1], "w") as f:
            json.dump(data, f)
    return paths


def merged(tool, directory, calls, span_s, ppm, **written):
    """Merges a simulated run; returns host b's placement, the worst error of host a's and of
    host b's events against the truth (us), and what merge printed."""
    events, truth = simulate(calls, span_s, ppm)
    paths = write(directory, events, ppm, **written)
    out = os.path.join(directory, "merged.json")
    printed = subprocess.run([sys.executable, tool, "merge", *paths, "-o", out], check=True,
                             capture_output=True, text=True).stdout
    with open(out) as f:
        trace = json.load(f)
    # Host a keeps rank 0's clock, so its events sit at their true times minus the merged start.
    start = None
    worst = {"a": 0.0, "b": 0.0}
    for e in trace["traceEvents"]:
        if e.get("cat") not in ("step", "collective"):
            continue
        true = truth[(e["pid"], e["cat"], e["args"]["call"], e["name"], e["args"].get("chunk"))]
        if start is None and e["pid"] == 0:
            start = true - e["ts"]
        if start is not None:
            host = HOSTS[e["pid"]]
            worst[host] = max(worst[host], abs(e["ts"] + start - true))
    return trace["otherData"]["clock_hosts"]["b"], worst, trace["otherData"]["clock"], printed


def check(condition, what, *details):
    if not condition:
        print(f"FAIL: {what}", *details, file=sys.stderr)
        sys.exit(1)


def main():
    tool = sys.argv[1]
    try:
        import scipy  # noqa: F401 (merge fits the drift with scipy's linear programming)
    except ImportError:
        print("scipy missing (Debian: apt-get install python3-scipy): drift not checked")
        sys.exit(77)  # ctest: skipped
    with tempfile.TemporaryDirectory(prefix="ringlet-trace-drift.") as d:
        # 50 ppm over 10 s: by the end the creation offset is 500 us wrong; the fit follows.
        b, worst, clock, printed = merged(tool, d, calls=1000, span_s=10, ppm=50)
        check(b["method"] == "drift fit", "a 50 ppm drift is fitted", b)
        check(abs(b["ppm"] + 50) < 1, "the fitted rate is host b's (-50 ppm)", b)
        check(worst["a"] < 0.01, "rank 0's host is not moved", worst)
        check(worst["b"] < TOLERANCE_US, f"host b within {TOLERANCE_US} us of the truth", worst)
        check("drift fitted for 1 of 1 hosts" in clock, "the merged clock says so", clock)
        check("b (ranks 2, 3): drift fit" in printed, "merge prints it", printed)
        # No drift: the measured offset stays, 1.5 us off as measured.
        b, worst, clock, _ = merged(tool, d, calls=1000, span_s=10, ppm=0)
        check(b["method"] == "constant offset" and b["why"].startswith("no drift"),
              "without drift the constant offset stays", b)
        check(abs(worst["b"] - MEASURED_ERROR_US) < 0.01, "the measured offset is used", worst)
        check(clock.endswith(", constant"), "the merged clock says constant", clock)
        # Clock exchanges at creation and after calls 1023 and 2047 (here 0, 4 and 8 s in), and
        # messages from a to b only: no message fit is possible, the exchanges' line follows.
        for one_way in (True, False):
            b, worst, clock, printed = merged(tool, d, calls=1000, span_s=10, ppm=50,
                                              exchanges_s=[0, 4, 8], one_way=one_way)
            check(b["method"] == "clock exchanges", "the exchanges' line is used", b)
            check(abs(b["ppm"] + 50) < 2, "its rate is host b's (-50 ppm)", b)
            check(worst["b"] < TOLERANCE_US, f"host b within {TOLERANCE_US} us", worst)
            check("b (ranks 2, 3): clock exchanges, 3 clock exchanges" in printed,
                  "merge prints it", printed)
        # A drift smaller than the exchanges can tell (0.5 ppm over 8 s against +-9.4 us): the
        # first offset, and why.
        b, _, _, _ = merged(tool, d, calls=2, span_s=10, ppm=0.5, exchanges_s=[0, 8])
        check(b["method"] == "constant offset" and "no drift shown by 2 clock exchanges" in b["why"],
              "an exchanges' slope within their error is not followed", b)
        # Too few messages, a span too short, or a fit that contradicts the measured offset at
        # the start: the constant offset, and the reason.
        for calls, span_s, error_us, why in [(2, 10, MEASURED_ERROR_US, "too few messages"),
                                             (1000, 0.5, MEASURED_ERROR_US, "messages span"),
                                             (1000, 10, 1000.0, "from the measured offset")]:
            b, worst, _, _ = merged(tool, d, calls, span_s, ppm=50, measured_error_us=error_us)
            check(b["method"] == "constant offset" and why in b["why"],
                  f"falls back on the constant offset: {why}", b)
            check(abs(b["offset_us"] - (-B_AHEAD_US + error_us)) < 0.01, "the measured one", b)
    print("ok")


if __name__ == "__main__":
    main()
