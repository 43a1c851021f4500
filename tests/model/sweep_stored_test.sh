#!/usr/bin/env bash
# scripts/sweep_stored.py, which re-prices stored in-turn sweeps (ringlet-bench --vs-algos) with
# this build's model: it counts the sizes whose auto run took a forced algorithm; a sweep whose
# algorithms all took the same time has every pick within 1.10; one where each size's pick took
# twice the others' time has none.
#
#   sweep_stored_test.sh SOURCE_DIR BUILD_DIR
set -u
src="$1"
build="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sweep="$src/bench/results/algo-sweep-n4-2026-12-02-bench.json.gz"
[[ -f "$sweep" ]] || fail "no sweep $sweep"
tool="$src/scripts/sweep_stored.py"
out=$(/usr/bin/python3 "$tool" --build "$build" -v --sweeps "$sweep") || fail "sweep_stored.py failed: $out"
# The sizes it judges: every result of 1 byte or more with two or more forced algorithms, auto's
# among them.
want=$(/usr/bin/python3 -c '
import gzip, json, sys
d = json.load(gzip.open(sys.argv[1]))
print(sum(1 for r in d["results"]
          if r.get("size") and len(r.get("algos") or {}) >= 2 and r.get("algorithm") in r["algos"]))' "$sweep")
(( want > 50 )) || fail "the sweep has only $want forcible sizes"
tail -1 <<<"$out" | grep -Eq "^all: [0-9]+ of $want$" || fail "last line is not the count over $want sizes: $(tail -1 <<<"$out")"
[[ $(grep -c "^  pick: " <<<"$out") == "$want" ]] || fail "not one pick line per size"

# Every algorithm of a size equally fast: every pick within 1.10.
# Each size's pick twice as slow as the others: no pick within 1.10.
echo "$out" >"$tmp/picks.txt"
/usr/bin/python3 - "$sweep" "$tmp" <<'PY' || fail "could not write the doctored sweeps"
import gzip, json, sys
picks = {}
for line in open(f"{sys.argv[2]}/picks.txt"):
    if line.startswith("  pick: "):
        _, _, op, size, algo = line.split()[:5]
        picks[(op, int(size))] = algo
for name, slow in (("even", False), ("slow", True)):
    d = json.load(gzip.open(sys.argv[1]))
    for r in d["results"]:
        for a, v in (r.get("algos") or {}).items():
            v["time_us"] = 2.0 if slow and picks.get((r.get("op"), r.get("size"))) == a else 1.0
    json.dump(d, open(f"{sys.argv[2]}/{name}.json", "w"))
PY
even=$(/usr/bin/python3 "$tool" --build "$build" --sweeps "$tmp/even.json") || fail "even: $even"
tail -1 <<<"$even" | grep -q "^all: $want of $want$" || fail "equal times left picks out: $(tail -1 <<<"$even")"
slow=$(/usr/bin/python3 "$tool" --build "$build" --sweeps "$tmp/slow.json") || fail "slow: $slow"
tail -1 <<<"$slow" | grep -q "^all: 0 of $want$" || fail "slow picks counted within: $(tail -1 <<<"$slow")"
echo "OK"
