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
# A link's byte past the cache: the shift's factor, and where it was measured (ranks with cores
# of their own) the half way and one-way points beside it, each 0 (not measured) or at least 1.
model = report["model"]
names = ("link_memory_factor", "link_memory_mid_factor", "one_way_memory_factor",
         "one_way_memory_mid_factor")
for name in names:
    assert name in model and (model[name] == 0 or model[name] >= 1), (name, model)
if model["ranks_share_cores"]:
    assert all(model[name] == 0 for name in names), model
else:
    assert model["link_memory_factor"] >= 1 and model["link_memory_mid_factor"] >= 1, model
print("report ok:", len(rows), "rows, gauge", gauge["start_s"], gauge["end_s"])
PY
if /usr/bin/python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["model"]["link_memory_mid_factor"] > 0 else 1)' "$tmp/report.json"; then
  grep -qE "a link's byte [0-9.]+x at 8 MiB and [0-9.]+x at 32 MiB a rank" <<<"$out" ||
    fail "the header does not name the link's past-cache points"
fi
grep -qE "^the run's gauge \(allreduce recursive_doubling of 262144 bytes, timed before every row and after them\): [0-9.]+ us, then [0-9.]+ us \([0-9.]+x\)" <<<"$out" ||
  fail "no gauge line in the text"
grep -qE "^from 64 KiB: [0-9]+ of 10 predictions within 25%" <<<"$out" || fail "no summary line"
grep -qE "^rows timed while the ranks' 8-byte round trip stayed within 1.5x of its [0-9.]+ us at the calibration \(before the row and after it\): [0-9]+ of [0-9]+ predictions within 25%" <<<"$out" ||
  fail "no line for the rows timed where the calibration ran"

# --recalibrate: every row measured with a model of its own (Communicator::recalibrate just
# before it), kept in the row and predicted with; the first calibration's prediction beside it;
# the text says how the start's calibration alone did. `predict` prices such a row with its own
# model: a row whose model is made ten times dearer is predicted dearer, its predicted_first_s
# unchanged.
out=$(timeout 120 "$bin/ringlet-model" measure -n 2 -b 256K -e 1M -f 4 -r 3 -c allreduce \
  --recalibrate --calibration-effort 2 -o "$tmp/recal.json" 2>&1) ||
  fail "ringlet-model measure --recalibrate failed: $out"
echo "$out"
grep -qE "^each row was predicted with the model measured again just before it \(--recalibrate\); with the calibration at the start alone: [0-9]+ of 6 within 25%" <<<"$out" ||
  fail "no line for the calibration at the start"
/usr/bin/python3 - "$tmp/recal.json" "$tmp/dearer.json" <<'PY' || fail "the recalibrated report is not what measure promises"
import json, sys
report = json.load(open(sys.argv[1]))
rows = report["rows"]
assert len(rows) == 6, len(rows)
for r in rows:
    m = r["model"]
    assert m["alpha_s"] > 0 and m["beta_s_per_byte"] > 0, m
    assert r["predicted_s"] > 0 and r["predicted_first_s"] > 0, r
# Each row measured its own model: not all of them equal to the start's.
assert any(r["model"] != report["model"] for r in rows), "no row has a model of its own"
# Every rate ten times dearer, so the row's price is about ten times its own whichever term
# leads it (under ASan the reduce, gamma, outweighs the link's bytes: beta alone did not double
# it).
for key in ("alpha_s", "beta_s_per_byte", "beta_one_way_s_per_byte", "gamma_s_per_byte",
            "delta_s_per_byte"):
    rows[0]["model"][key] *= 10
json.dump(report, open(sys.argv[2], "w"))
PY
"$bin/ringlet-model" predict "$tmp/recal.json" -o "$tmp/recal-again.json" > /dev/null ||
  fail "predict of a recalibrated report failed"
"$bin/ringlet-model" predict "$tmp/dearer.json" -o "$tmp/dearer-again.json" > /dev/null ||
  fail "predict of the changed report failed"
/usr/bin/python3 - "$tmp/recal-again.json" "$tmp/dearer-again.json" <<'PY' || fail "predict does not price a row with its own model"
import json, sys
same, dearer = (json.load(open(p))["rows"] for p in sys.argv[1:3])
assert dearer[0]["predicted_s"] > 2 * same[0]["predicted_s"], (dearer[0], same[0])
assert dearer[0]["predicted_first_s"] == same[0]["predicted_first_s"], (dearer[0], same[0])
assert [r["predicted_s"] for r in dearer[1:]] == [r["predicted_s"] for r in same[1:]]
print("recalibrated report ok")
PY
