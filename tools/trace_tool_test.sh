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
