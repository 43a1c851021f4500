#!/usr/bin/env bash
# ringlet-model measure, run as a user would on two ranks (it starts them through ringlet-run):
# every algorithm of the collectives asked for, timed at each size beside a positive prediction,
# the run's gauge (one row timed before every other row and after them), and the ranks' 8-byte
# round trip after the calibration and around every row, in the report and in the text.
#
#   model_measure_test.sh BIN_DIR
set -u
bin="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$(timeout 120 "$bin/ringlet-model" measure -n 2 -b 64K -e 256K -f 4 -r 3 \
  -c allreduce broadcast -o "$tmp/report.json" 2>&1) || fail "ringlet-model measure failed: $out"
echo "$out"
/usr/bin/python3 - "$tmp/report.json" <<'PY' || fail "the report is not what measure promises"
import json, sys
report = json.load(open(sys.argv[1]))
rows = report["rows"]
# all-reduce: recursive doubling, Rabenseifner, ring; broadcast: tree, chain; two sizes each.
keys = sorted((r["collective"], r["algorithm"], r["bytes"]) for r in rows)
want = sorted((c, a, b) for c, algos in (("allreduce", ("recursive_doubling", "rabenseifner", "ring")),
                                         ("broadcast", ("tree", "chain")))
              for a in algos for b in (65536, 262144))
assert keys == want, f"rows {keys}, expected {want}"
for r in rows:
    assert r["measured_s"] > 0 and r["predicted_s"] > 0 and r["fastest_s"] <= r["measured_s"], r
gauge = report["gauge"]
# The first collective asked for, its first algorithm, at the size nearest 1 MiB.
assert (gauge["collective"], gauge["algorithm"], gauge["bytes"]) == \
    ("allreduce", "recursive_doubling", 262144), gauge
assert gauge["start_s"] > 0 and gauge["end_s"] > 0, gauge
assert report["round_trip_s"] > 0, report["round_trip_s"]
for r in rows:
    trips = r["round_trip_s"]
    assert len(trips) == 2 and all(t > 0 for t in trips), r
print("report ok:", len(rows), "rows, gauge", gauge["start_s"], gauge["end_s"])
PY
grep -qE "^the run's gauge \(allreduce recursive_doubling of 262144 bytes, timed before every row and after them\): [0-9.]+ us, then [0-9.]+ us \([0-9.]+x\)" <<<"$out" ||
  fail "no gauge line in the text"
grep -qE "^from 64 KiB: [0-9]+ of 10 predictions within 25%" <<<"$out" || fail "no summary line"
grep -qE "^rows timed while the ranks' 8-byte round trip stayed within 1.5x of its [0-9.]+ us at the calibration \(before the row and after it\): [0-9]+ of [0-9]+ predictions within 25%" <<<"$out" ||
  fail "no line for the rows timed where the calibration ran"
