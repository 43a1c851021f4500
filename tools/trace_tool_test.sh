#!/bin/sh
# ringlet-trace on a real job: three ranks of ringlet-run with RINGLET_TRACE set, merged, shown
# and (where matplotlib is installed) drawn. Usage: trace_tool_test.sh BUILD_BIN_DIR
set -eu
bin=$1
dir=$(mktemp -d /tmp/ringlet-trace-tool.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

RINGLET_TRACE="$dir/t" RINGLET_ALGO=allreduce:ring RINGLET_TIMEOUT=20 \
  "$bin/ringlet-run" -n 3 "$bin/ringlet-teach-allreduce" 30000 > "$dir/run.out"
for r in 0 1 2; do [ -s "$dir/t.rank$r.json" ] || fail "no trace from rank $r"; done

/usr/bin/python3 "$bin/ringlet-trace" merge "$dir"/t.rank*.json -o "$dir/merged.json"
/usr/bin/python3 - "$dir/merged.json" <<'PY' || fail "merged file"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["otherData"]["merged_ranks"] == [0, 1, 2], t["otherData"]
steps = [e for e in t["traceEvents"] if e.get("cat") == "step" and e["name"] == "recvReduceCopySend"]
assert {e["pid"] for e in steps} == {0, 1, 2}, "every rank's final reductions"
assert min(e["ts"] for e in t["traceEvents"] if "ts" in e) == 0
PY
# The clock exchange at creation: rank 0 is the reference; the others share its host's monotonic
# clock, so their measured offsets are within their uncertainty of 0 (and well under 5 ms).
/usr/bin/python3 - "$dir" <<'PY' || fail "measured clock offsets"
import json, sys
for r in range(3):
    o = json.load(open(f"{sys.argv[1]}/t.rank{r}.json"))["otherData"]
    offset, uncertainty = o["clock_offset_to_rank0_ns"], o["clock_offset_uncertainty_ns"]
    if r == 0:
        assert (offset, uncertainty, o["clock_offset_samples"]) == (0, 0, 0), o
    else:
        assert abs(offset) < 5_000_000 and 0 < uncertainty and abs(offset) <= uncertainty, o
        assert o["clock_offset_samples"] > 0, o
t = json.load(open(f"{sys.argv[1]}/merged.json"))
assert t["otherData"]["clock"] == "one host: monotonic", t["otherData"]
PY
# The messages merge fits a drift to, paired from the steps of this real run with every rank
# taken for a host of its own: every send of the all-reduce calls is found (sends that the other
# side does not trace as steps, as in the cost model's measurement at creation, are not), and on
# this one clock no receive ends before its send began.
/usr/bin/python3 - "$dir" "$bin/ringlet-trace" <<'PY' || fail "messages paired from the steps"
import importlib.machinery, json, sys
tool = importlib.machinery.SourceFileLoader("ringlet_trace", sys.argv[2]).load_module()
files = [json.load(open(f"{sys.argv[1]}/t.rank{r}.json")) for r in range(3)]
messages = tool.cross_host_messages(files, ["h0", "h1", "h2"])
events = [e for f in files for e in f["traceEvents"]]
allreduce = {e["args"]["call"] for e in events if e.get("name") == "allreduce"}
sends = sum(1 for e in events if e.get("cat") == "step" and e["args"]["to"] >= 0
            and e["args"]["call"] in allreduce)
assert len(messages) >= sends > 0, (len(messages), sends)
assert all(sent <= received for _, sent, _, received in messages), "a receive before its send"
PY
# Across hosts merge applies the measured offsets. Rank 2's file is made to come from another
# host whose monotonic clock is 3.7 s ahead (its times, steady_ns and offset moved by that) and
# whose wall clock is 0.25 s wrong: merged, its events must land where they did on the one host
# (up to the offset measured here, which merge on one host does not apply), and without the
# offsets merge falls back to the wall clocks and misplaces them by the 0.25 s.
/usr/bin/python3 - "$dir" "$bin/ringlet-trace" <<'PY' || fail "merge across hosts"
import json, os, subprocess, sys
d, tool = sys.argv[1], sys.argv[2]
ahead_ns, wall_error_ns = 3_700_000_000, 250_000_000
moved = json.load(open(f"{d}/t.rank2.json"))
measured_ns = moved["otherData"]["clock_offset_to_rank0_ns"]
for e in moved["traceEvents"]:
    if "ts" in e:
        e["ts"] += ahead_ns / 1000
o = moved["otherData"]
o["host"] = "another-host"
o["steady_ns"] += ahead_ns
o["system_ns"] += wall_error_ns
o["clock_offset_to_rank0_ns"] -= ahead_ns
os.mkdir(f"{d}/hosts")
json.dump(moved, open(f"{d}/hosts/t.rank2.json", "w"))
for r in (0, 1):
    os.symlink(f"{d}/t.rank{r}.json", f"{d}/hosts/t.rank{r}.json")

def merged(name):
    files = [f"{d}/hosts/t.rank{r}.json" for r in range(3)]
    subprocess.run([sys.executable, tool, "merge", *files, "-o", f"{d}/{name}"], check=True,
                   stdout=subprocess.DEVNULL)
    return json.load(open(f"{d}/{name}"))

def rank2_from_rank0(trace):
    # Each of rank 2's events, from rank 0's first event (the merged start may move).
    timed = [e for e in trace["traceEvents"] if "ts" in e]
    anchor = min(e["ts"] for e in timed if e["pid"] == 0)
    return [e["ts"] - anchor for e in timed if e["pid"] == 2]

reference = rank2_from_rank0(json.load(open(f"{d}/merged.json")))
across = merged("across.json")
clock = across["otherData"]["clock"]
assert clock.startswith("measured offsets to rank 0 (max uncertainty"), clock
error = max(abs(a - b) for a, b in zip(rank2_from_rank0(across), reference))
assert error <= abs(measured_ns) / 1000 + 0.01, (error, measured_ns)
del moved["otherData"]["clock_offset_to_rank0_ns"]
json.dump(moved, open(f"{d}/hosts/t.rank2.json", "w"))
wall = merged("wall.json")
assert wall["otherData"]["clock"] == "wall clocks of the hosts", wall["otherData"]
error = [a - b for a, b in zip(rank2_from_rank0(wall), reference)]
assert all(abs(x - wall_error_ns / 1000) < 1000 for x in error), error[:3]
PY
/usr/bin/python3 "$bin/ringlet-trace" show "$dir/merged.json" --call allreduce > "$dir/show.out"
grep -q "ring" "$dir/show.out" || fail "show names the algorithm"
# The ring at N = 3: 2N-1 = 5 primitives per slice on every rank.
grep -q "rank 2: .* 5 steps" "$dir/show.out" || { cat "$dir/show.out"; fail "rank 2 has 5 steps"; }
# Errors are one line starting with ringlet:
if /usr/bin/python3 "$bin/ringlet-trace" show "$dir/merged.json" --call bogus 2> "$dir/err"; then
  fail "an unknown call is an error"
fi
grep -q "^ringlet: no call named bogus" "$dir/err" || fail "error message: $(cat "$dir/err")"
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$bin/ringlet-trace" plot "$dir"/t.rank*.json -o "$dir/ring.png" > /dev/null
  [ -s "$dir/ring.png" ] || fail "no picture"
else
  echo "matplotlib missing: plot not checked"
fi
echo "ok"
