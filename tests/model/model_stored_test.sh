#!/usr/bin/env bash
# scripts/model_stored.py, which re-prices stored ringlet-model reports with this build's model:
# its counts match the reports' rows, a run compared with itself moves nothing, and reports whose
# one-way rate was doubled are priced differently, group by group, against the saved run.
#
#   model_stored_test.sh SOURCE_DIR BUILD_DIR
set -u
src="$1"
build="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/a" "$tmp/b"
reports=("$src/docs/data/model-16core-n4.json" "$src/bench/results/one-way-fill-2026-12-02/n2-1.json")
for r in "${reports[@]}"; do
  [[ -f "$r" ]] || fail "no report $r"
  cp "$r" "$tmp/a/"
done
# b: the same reports, every one-way rate doubled (broadcasts are priced by it).
/usr/bin/python3 - "$tmp/a" "$tmp/b" <<'PY' || fail "could not write the doubled reports"
import json, os, sys
for name in os.listdir(sys.argv[1]):
    d = json.load(open(os.path.join(sys.argv[1], name)))
    d["model"]["beta_one_way_s_per_byte"] *= 2
    json.dump(d, open(os.path.join(sys.argv[2], name), "w"))
PY
tool="$src/scripts/model_stored.py"
out=$(/usr/bin/python3 "$tool" --build "$build" --reports "$tmp/a" --save "$tmp/a.json") ||
  fail "model_stored.py failed: $out"
echo "$out"
# The points it judges: every row of 64 KiB and more with a measured time.
want=$(/usr/bin/python3 -c '
import json, sys
print(sum(1 for f in sys.argv[1:] for r in json.load(open(f))["rows"]
          if r["bytes"] >= 65536 and r.get("measured_s", 0) > 0))' "${reports[@]}")
# model-16core-n4.json is of the calibration before version 2 (converted), n2-1.json of version 2.
head -1 <<<"$out" | grep -Eq "^2 reports: [0-9]+ of $want points within 25%, the choice within 10% at [0-9]+ of [0-9]+ collective sizes \(1 of an older calibration converted\)$" ||
  fail "first line is not the counts over $want points: $(head -1 <<<"$out")"
grep -Eq "^4 broadcast: [0-9]+ of [0-9]+ within 25%, median ratio [0-9.]+$" <<<"$out" ||
  fail "no line for the 4-rank broadcasts"

same=$(/usr/bin/python3 "$tool" --build "$build" --reports "$tmp/a" --against "$tmp/a.json") ||
  fail "the comparison with itself failed: $same"
grep -q "choice" <<<"$(tail -n +3 <<<"$same")" && fail "a run compared with itself moved a choice"
first=$(head -1 <<<"$same" | grep -Eo "[0-9]+ of [0-9]+ points" | head -1)
grep -q "^the saved run: $first within 25%" <<<"$same" ||
  fail "the saved run's count differs from the same run's: $same"

doubled=$(/usr/bin/python3 "$tool" --build "$build" --reports "$tmp/b" --against "$tmp/a.json" \
  --by algorithm) || fail "the doubled reports failed: $doubled"
echo "$doubled"
# Every broadcast is priced by the one-way rate: its median ratio rises in every group.
groups=$(grep -cE "^[0-9]+ broadcast " <<<"$doubled")
moved=$(grep -E "^[0-9]+ broadcast " <<<"$doubled" | awk '{
  for (i = 1; i <= NF; ++i) { if ($i == "ratio") now = $(i + 1); if ($i == "median" && $(i + 1) ~ /\)$/) was = $(i + 1) }
  sub(/\)$/, "", was); if (now + 0 > was + 0) n++ } END { print n + 0 }')
(( groups >= 4 && moved == groups )) || fail "doubling the one-way rate did not raise the broadcasts' prices: $doubled"
echo "OK"
