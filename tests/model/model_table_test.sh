#!/usr/bin/env bash
# ringlet-model table on a report measured earlier (docs/data/model-n4.json): one section per
# collective with every algorithm's prediction, the choice and its bus bandwidth; bad options
# are one clear error. ringlet-model predict on the same report: every row predicted again from
# the report's own parameters.
#
#   model_table_test.sh BIN_DIR REPORT
set -u
bin="$1"
report="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$bin/ringlet-model" table "$report" --ranks 8 4096 --sizes 65536 67108864 \
  --link-alpha 2e-5 5e-6 2e-6) || fail "ringlet-model table failed: $out"
echo "$out"
for c in allreduce allgather reducescatter broadcast; do
  grep -q "^### $c$" <<<"$out" || fail "no section for $c"
done
grep -q "| ring | chosen | busbw GB/s |" <<<"$out" || fail "no column per algorithm"
grep -q "alpha per link: 10 Gbit/s 20.0 us, 100 Gbit/s 5.0 us, 400 Gbit/s 2.0 us" <<<"$out" ||
  fail "the link alphas are not the ones given"
# 2 sizes x 2 rank counts x (measured + 3 links) rows per collective.
rows=$(grep -c "^| [0-9]* [KM]iB | [0-9]* | " <<<"$out")
(( rows == 4 * 16 )) || fail "expected 64 rows, got $rows"
# Every row has a positive bus bandwidth.
awk -F'|' '/^\| [0-9]+ [KM]iB/ {
  n = NF - 1; chosen = $(n - 1); gsub(/ /, "", chosen); busbw = $n + 0
  if (busbw <= 0) { print "non-positive busbw: " $0; bad = 1 }
}
END { exit bad }' <<<"$out" || fail "a row has no bus bandwidth"

# A network link moves a large buffer at its own rate: the ring's busbw at 64 MiB is the link's
# (10 Gbit/s = 1.25 GB/s, less its alphas), not scaled down by the host's memory.
ring=$(grep "^| 64 MiB | 8 | 10 Gbit/s |" <<<"$out" | head -1)
[[ -n "$ring" ]] || fail "no 64 MiB row for 8 ranks at 10 Gbit/s"
awk -F'|' '{ busbw = $(NF - 1) + 0; if (busbw < 1.15 || busbw > 1.25) exit 1 }' <<<"$ring" ||
  fail "the 10 Gbit/s link's 64 MiB ring busbw is not about its rate: $ring"

err=$("$bin/ringlet-model" table "$report" -c allreduce nope 2>&1) && fail "an unknown collective was accepted"
grep -q "^ringlet: --collectives: 'nope' is not a collective" <<<"$err" || fail "unclear error: $err"
err=$("$bin/ringlet-model" table "$report" --link-alpha 1e-5 2e-6 2>&1) &&
  fail "two alphas for three links were accepted"
grep -q "^ringlet: --link-alpha gives 2 values for 3 links" <<<"$err" || fail "unclear error: $err"

# A report whose model lacks a parameter, or holds a string for one: one clear error naming it
# (reading a missing key once ran past the parsed object, caught by AddressSanitizer).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '{"model": {"alpha_s": 1e-6, "gamma_s_per_byte": 1e-11, "delta_s_per_byte": 1e-11}}' \
  > "$tmp/no-beta.json"
err=$("$bin/ringlet-model" table "$tmp/no-beta.json" 2>&1) && fail "a model without beta was accepted"
grep -q '^ringlet: the report.s "model" has no number "beta_s_per_byte"$' <<<"$err" ||
  fail "unclear error: $err"
echo '{"model": {"alpha_s": "fast", "beta_s_per_byte": 1e-10, "gamma_s_per_byte": 1e-11,
  "delta_s_per_byte": 1e-11}}' > "$tmp/text-alpha.json"
err=$("$bin/ringlet-model" table "$tmp/text-alpha.json" 2>&1) && fail "a text alpha was accepted"
grep -q '^ringlet: the report.s "model" has no number "alpha_s"$' <<<"$err" ||
  fail "unclear error: $err"

# Whether the measured job's ranks shared cores does not carry over to the ranks the table
# extrapolates to: the same table with and without it.
sed 's/"direct_bytes": \([0-9.e+-]*\)/"direct_bytes": \1, "ranks_share_cores": true/' "$report" \
  > "$tmp/shared.json"
grep -q '"ranks_share_cores": true' "$tmp/shared.json" || fail "could not mark the report"
[[ $("$bin/ringlet-model" table "$tmp/shared.json") == $("$bin/ringlet-model" table "$report") ]] ||
  fail "a measuring job whose ranks shared cores changed the extrapolation"

# predict: the same rows, each with a positive prediction, from the report's own model: the same
# report with a 1-second alpha predicts every row at a second or more.
"$bin/ringlet-model" predict "$report" -o "$tmp/again.json" > "$tmp/again.txt" ||
  fail "ringlet-model predict failed: $(cat "$tmp/again.txt")"
[[ $(grep -c '"predicted_s"' "$tmp/again.json") == $(grep -c '"predicted_s"' "$report") ]] ||
  fail "predict wrote another number of rows"
rows=$(grep -c "^allreduce \|^allgather \|^reducescatter \|^broadcast " "$tmp/again.txt")
(( rows == $(grep -c '"predicted_s"' "$report") )) || fail "predict printed $rows rows"
awk '/^(allreduce|allgather|reducescatter|broadcast) / { if ($5 + 0 <= 0) exit 1 }' \
  "$tmp/again.txt" || fail "a predicted time is not positive: $(cat "$tmp/again.txt")"
# The summary counts the rows from 64 KiB whose error is within 25% (the printed error is
# rounded: a row printed at 25% may count either way).
read -r sure maybe judged < <(awk '/^(allreduce|allgather|reducescatter|broadcast) / && $3 >= 65536 {
  e = $6; sub(/%/, "", e); e += 0; e = e < 0 ? -e : e; n++; if (e < 25) s++; if (e <= 25) m++ }
  END { print s + 0, m + 0, n + 0 }' "$tmp/again.txt")
summary=$(grep "^from 64 KiB: " "$tmp/again.txt") || fail "no summary line: $(tail -2 "$tmp/again.txt")"
[[ $summary =~ ^from\ 64\ KiB:\ ([0-9]+)\ of\ ([0-9]+)\ predictions\ within\ 25%.*\ at\ ([0-9]+)\ of\ ([0-9]+)\ collective\ sizes$ ]] ||
  fail "unexpected summary: $summary"
(( BASH_REMATCH[2] == judged && BASH_REMATCH[1] >= sure && BASH_REMATCH[1] <= maybe )) ||
  fail "summary $summary against $sure-$maybe of $judged rows"
(( judged > 0 && BASH_REMATCH[4] > 0 && BASH_REMATCH[3] <= BASH_REMATCH[4] )) ||
  fail "summary counts no sizes: $summary"
sed 's/"alpha_s": [0-9.e+-]*/"alpha_s": 1/' "$report" > "$tmp/slow.json"
"$bin/ringlet-model" predict "$tmp/slow.json" > "$tmp/slow.txt" || fail "predict failed on slow"
awk '/^(allreduce|allgather|reducescatter|broadcast) / { if ($5 + 0 < 1e6) exit 1 }' \
  "$tmp/slow.txt" || fail "a 1-second alpha predicted a row under a second: $(cat "$tmp/slow.txt")"
grep -q "^from 64 KiB: 0 of [1-9][0-9]* predictions within 25%" "$tmp/slow.txt" ||
  fail "a 1-second alpha's predictions counted as close: $(tail -1 "$tmp/slow.txt")"
echo '{"model": {"alpha_s": 1e-6, "beta_s_per_byte": 1e-10, "gamma_s_per_byte": 1e-11,
  "delta_s_per_byte": 1e-11}, "ranks": 2, "rows": [{"collective": "allreduce", "bytes": 8}]}' \
  > "$tmp/no-algorithm.json"
err=$("$bin/ringlet-model" predict "$tmp/no-algorithm.json" 2>&1) &&
  fail "a row without an algorithm was accepted"
grep -q '^ringlet: a row of the report has no "algorithm"$' <<<"$err" || fail "unclear error: $err"
# measure times the collectives it names, each under its own name: every algorithm of reduce and
# gather (rows, and the calls the trace of its communicators records), no broadcast in their
# place; a collective it cannot time is an error before any rank starts.
mkdir -p "$tmp/trace"
RINGLET_TRACE="$tmp/trace/t" "$bin/ringlet-model" measure -n 2 -c reduce gather -b 4K -e 4K -r 1 \
  -o "$tmp/measured.json" > "$tmp/measured.txt" 2>&1 || fail "measure failed: $(cat "$tmp/measured.txt")"
for row in "reduce +tree" "reduce +chain" "gather +tree" "gather +linear"; do
  grep -Eq "^$row +" "$tmp/measured.txt" || fail "measure printed no '$row' row: $(cat "$tmp/measured.txt")"
done
grep -q "^broadcast " "$tmp/measured.txt" && fail "measure timed a broadcast it was not asked for"
calls=$(cat "$tmp"/trace/t.split*.rank0.json | grep -o '"name":"[a-z]*"' | sort -u | tr '\n' ' ')
[[ $calls == *'"name":"reduce"'* && $calls == *'"name":"gather"'* ]] ||
  fail "the traces hold no reduce and gather calls: $calls"
[[ $calls != *'"name":"broadcast"'* ]] || fail "a broadcast ran in measure's place: $calls"
err=$("$bin/ringlet-model" measure -n 2 -c reduce allgatherv -b 4K -e 4K 2>&1) &&
  fail "measure accepted allgatherv"
grep -q "^ringlet: --collectives: 'allgatherv' is not one measure can time" <<<"$err" ||
  fail "unclear error: $err"
echo "ok"
