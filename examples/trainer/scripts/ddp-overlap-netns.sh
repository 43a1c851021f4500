#!/usr/bin/env bash
# The DDP synchronizer over a slow link: two network namespaces joined by a veth pair, both ends
# rate-limited with tc tbf, one ringlet-train rank in each (torchrun-style environment, TCP store
# on rank 0), BERT encoder; step time with buckets all-reduced during backward, after backward,
# and during backward in 16 bits (--mixed-precision bf16: half the bytes on the wire), with
# their ratios to the first. Needs root. Everything it creates is removed on
# exit, also on failure or Ctrl-C. Both namespaces share the host name, so each rank is told its
# own address (RINGLET_SOCKET_ADDR); otherwise the TCP transport would pick loopback.
#   usage: examples/trainer/scripts/ddp-overlap-netns.sh [BUILD_DIR]
#   (RATE=200mbit STEPS=30 EXTRA="--bucket-mb 1" adds ringlet-train flags)
set -euo pipefail
build=${1:-build}
train=$(realpath "$build/bin/ringlet-train")
rate=${RATE:-200mbit}
steps=${STEPS:-30}
tag=rgl$$
ns0=${tag}a ns1=${tag}b
out=$(mktemp -d /tmp/ddp-overlap.XXXXXX)
cleanup() {
  ip netns pids "$ns0" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns pids "$ns1" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del "$ns0" 2>/dev/null || true
  ip netns del "$ns1" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT INT TERM

ip netns add "$ns0"
ip netns add "$ns1"
ip link add "${tag}0" netns "$ns0" type veth peer name "${tag}1" netns "$ns1"
ip -n "$ns0" addr add 10.77.0.1/24 dev "${tag}0"
ip -n "$ns1" addr add 10.77.0.2/24 dev "${tag}1"
for pair in "$ns0 ${tag}0" "$ns1 ${tag}1"; do
  set -- $pair
  ip -n "$1" link set lo up
  ip -n "$1" link set "$2" up
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$rate" burst 256kb latency 20ms
done

model=(--model bert --layers 2 --hidden 256 --heads 4 --ffn 1024 --seq 64 --batch 16
  --dropout 0 --steps "$steps" --warmup 2 --log-every "$steps" --eval-every 100000 --plot ""
  --no-progress --threads 1 --timing ${EXTRA:-})
run() {  # label, extra flags
  local port=$((29500 + RANDOM % 1000))
  # The store listens beyond loopback: the ranks share a job secret.
  local secret
  secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  local env="MASTER_ADDR=10.77.0.1 MASTER_PORT=$port WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 LOCAL_RANK=0 RINGLET_JOB_SECRET=$secret"
  ip netns exec "$ns1" env $env RANK=1 RINGLET_TRANSPORT=tcp RINGLET_SOCKET_ADDR=10.77.0.2 RINGLET_TIMEOUT=60 "$train" "${model[@]}" $2 \
    --csv "$out/r1.csv" > "$out/r1.log" 2>&1 &
  local p1=$!
  ip netns exec "$ns0" env $env RANK=0 RINGLET_TRANSPORT=tcp RINGLET_SOCKET_ADDR=10.77.0.1 RINGLET_TIMEOUT=60 "$train" "${model[@]}" $2 \
    --csv "$out/r0.csv" --json "$out/$3.json" > "$out/r0.log" 2>&1 || { cat "$out/r0.log" "$out/r1.log"; exit 1; }
  wait $p1 || { cat "$out/r1.log"; exit 1; }
  echo "== $1 ($rate)"
  grep -E "parallel|step +$steps +(loss|ms)" "$out/r0.log"
}
run "overlapped buckets" "" overlap
run "all-reduce after backward" "--no-overlap" after
run "overlapped buckets, bf16 on the wire" "--mixed-precision bf16" bf16
python3 - "$out" "$rate" <<'PY'
import json, sys
out, rate = sys.argv[1], sys.argv[2]
rows = [("overlap", "float32, all-reduce during backward"),
        ("after", "float32, all-reduce after backward"),
        ("bf16", "bf16 wire, all-reduce during backward")]
base = json.load(open(f"{out}/overlap.json"))["step_ms"]
print(f"\n| gradients ({rate}, 2 ranks) | median ms/step | vs float32 overlapped |")
print("| --- | ---: | ---: |")
for key, label in rows:
    ms = json.load(open(f"{out}/{key}.json"))["step_ms"]
    print(f"| {label} | {ms:.0f} | {ms / base:.2f} |")
PY
