#!/usr/bin/env bash
# A training job that loses a rank, is started again by ringlet-run --max-restarts and resumes
# from its last checkpoint, ends with the same checkpoint, bit for bit, as the same job run
# without a failure: every rank's data order, dropout stream and optimizer state are restored.
#
#   restart_test.sh BIN_DIR MODEL (mlp | bert)
set -u
bin="$(cd "$1" && pwd)" || exit 1
model="$2"
work="$(mktemp -d /tmp/ringlet-restart.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }

case "$model" in
  mlp) args=(--model mlp --steps 30 --checkpoint-every 10) crash=25 resumed=20 ;;
  bert) args=(--model bert --steps 12 --hidden 32 --heads 2 --ffn 64 --layers 1 --seq 16
              --batch 8 --checkpoint-every 4) crash=10 resumed=8 ;;
  *) fail "unknown model '$model'" ;;
esac
export TRAIN="$bin/ringlet-train" ARGS="${args[*]}" CRASH="$crash"

# The reference: no failure.
mkdir -p whole restarted
"$bin/ringlet-run" -n 2 --timeout 120 -- "$TRAIN" "${args[@]}" --checkpoint whole/ck \
  --csv whole/loss.csv --plot '' --no-progress >whole.log 2>&1 ||
  { cat whole.log >&2; fail "the run without a failure failed"; }

# The last rank exits after step $crash of the first start; the second start resumes from the
# checkpoint of step $resumed.
"$bin/ringlet-run" -n 2 --max-restarts 1 --timeout 120 -- sh -c 'exec "$TRAIN" $ARGS \
  --checkpoint restarted/ck --csv restarted/loss.csv --plot "" --no-progress \
  --resume restarted/ck --resume-if-present \
  $([ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && echo --crash-at-step "$CRASH")' >restarted.log 2>&1 ||
  { cat restarted.log >&2; fail "the restarted run failed"; }
cat restarted.log
grep -q "^ringlet-train: --crash-at-step $crash: rank 1 exits with status 3" restarted.log ||
  grep -q "\] ringlet-train: --crash-at-step $crash: rank 1 exits with status 3" restarted.log ||
  fail "the last rank did not crash at step $crash"
grep -q "no checkpoint at restarted/ck yet (--resume-if-present): from step 0" restarted.log ||
  fail "the first start did not say it starts afresh"
grep -q "^ringlet: starting every rank again (restart 1 of 1)$" restarted.log ||
  fail "ringlet-run did not start the ranks again"
grep -q "resumed from restarted/ck at step $resumed" restarted.log ||
  fail "the second start did not resume from step $resumed"
cmp whole/ck restarted/ck || fail "the final checkpoints differ"
echo "restart_test $model: the restarted run's checkpoint equals the uninterrupted run's"
