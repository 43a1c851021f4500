#!/usr/bin/env bash
# ringlet-bench started by the real torchrun (Debian's PyTorch, /usr/bin/python3):
#   1. static rendezvous (the default): torchrun's agent hosts a c10d TCPStore on MASTER_PORT and
#      sets TORCHELASTIC_USE_AGENT_STORE=True; every rank must use that store;
#   2. c10d rendezvous (what --standalone uses, here on a free port rather than its fixed 29400):
#      the workers' MASTER_PORT is free and rank 0 hosts ringlet's store there;
#   3. two "nodes" on this host: two torchrun commands, --nnodes 2, one rank each;
#   4. --max_restarts; 5. the job secret kept out of the agent's store (RINGLET_JOB_SECRET_FILE).
# Exits 77 (skipped) when /usr/bin/python3 cannot run torch.distributed.run.
# Usage: torchrun_test.sh RINGLET_BENCH
set -u
bench=$1
python=/usr/bin/python3
if ! out=$("$python" -c "import torch.distributed.run" 2>&1); then
  echo "skipped: $python cannot import torch.distributed.run: ${out##*$'\n'}"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A short run of a few collectives, every size checked (ringlet-bench exits 1 on a wrong value).
bench_args=(-b 8 -e 64K -f 16 -n 3 -w 1 --ops allreduce,broadcast,allgather,barrier)
export RINGLET_DEBUG=INFO RINGLET_TIMEOUT=30

# A port free now and outside the ephemeral range: torchrun's agent binds it only after importing
# torch, and meanwhile any connect() on the machine could take an ephemeral one.
free_port() {
  "$python" - <<'PY'
import random, socket
lo, hi = (int(x) for x in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
ports = [p for p in range(20000, 65536) if p < lo or p > hi]
for port in random.sample(ports, 64):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        print(port)
        break
    except OSError:
        pass
    finally:
        s.close()
PY
}

# torchrun [ARGS...]: runs it with a deadline, output in $work/log.
torchrun() {
  timeout -k 5 120 "$python" -m torch.distributed.run --redirects 1 --tee 1 "$@" \
    >"$work/log" 2>&1
}

fail() {
  echo "FAILED: $1"
  cat "$work/log"
  exit 1
}

expect_in_log() {
  grep -q -- "$1" "$work/log" || fail "$2: the output does not contain '$1'"
}

port=$(free_port)
torchrun --nproc_per_node=2 --master_addr=127.0.0.1 --master_port="$port" --no_python \
  "$bench" "${bench_args[@]}" || fail "static rendezvous: torchrun exited $?"
expect_in_log "uses the c10d store on 127.0.0.1:$port" "static rendezvous"
# The agent's TCPStore speaks the wire protocol of the torch installed: found by asking it.
case $("$python" -c "import torch; print(torch.__version__)") in
  1.*) expect_in_log "(PyTorch 1.13 protocol)" "static rendezvous (the store's protocol)" ;;
  *) expect_in_log "(PyTorch 2.x protocol)" "static rendezvous (the store's protocol)" ;;
esac
[ "$(grep -c 'uses the c10d store' "$work/log")" -ge 2 ] || fail "static: not every rank used it"
expect_in_log "allreduce" "static rendezvous"
echo "ok: static rendezvous, 2 ranks through the agent's c10d store"

port=$(free_port)
torchrun --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$port" --nnodes=1 --nproc_per_node=2 \
  --no_python "$bench" "${bench_args[@]}" || fail "c10d rendezvous: torchrun exited $?"
expect_in_log "hosts the store" "c10d rendezvous"
echo "ok: c10d rendezvous, rank 0 hosts ringlet's store"

port=$(free_port)
node() {
  timeout -k 5 120 "$python" -m torch.distributed.run --redirects 1 --tee 1 --nnodes=2 \
    --node_rank="$1" --nproc_per_node=1 --master_addr=127.0.0.1 --master_port="$port" \
    --no_python "$bench" "${bench_args[@]}" >"$work/node$1.log" 2>&1
}
node 0 &
pid0=$!
node 1
rc1=$?
wait "$pid0"
rc0=$?
cat "$work/node0.log" "$work/node1.log" >"$work/log"
[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] || fail "two nodes: torchrun exited $rc0 and $rc1"
[ "$(grep -c 'uses the c10d store' "$work/log")" -ge 2 ] || fail "two nodes: c10d store unused"
echo "ok: two torchrun nodes, one rank each, through node 0's agent store"

# 4. --max_restarts: in the first attempt local rank 1 exits 5 at once, while rank 0 has entered
#    the store (its communicator counter, the secret and its address); torchrun stops it and
#    starts both ranks again on the same agent store, where those keys remain. Each attempt must
#    meet under keys of its own: with one key space the second attempt's rank 1 would count its
#    first communicator where rank 0 counts its second, and join the dead rank 0's keys.
cat >"$work/flaky.sh" <<SH
#!/usr/bin/env bash
[ "\$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "\$LOCAL_RANK" = 1 ] && exit 5
exec "$bench" ${bench_args[*]}
SH
chmod +x "$work/flaky.sh"
port=$(free_port)
torchrun --nproc_per_node=2 --master_addr=127.0.0.1 --master_port="$port" --max_restarts=1 \
  --monitor_interval=1 --no_python "$work/flaky.sh" || fail "restart: torchrun exited $?"
[ "$(grep -c 'uses the c10d store' "$work/log")" -ge 3 ] || fail "restart: the ranks did not meet"
expect_in_log "exitcode: 5" "restart (the first attempt's failure)"
expect_in_log "allreduce" "restart (the second attempt's bench)"
echo "ok: torchrun --max_restarts, the second attempt under keys of its own"

# 5. The job secret under torchrun. The agent's TCPStore authenticates nobody, so without
#    RINGLET_JOB_SECRET(_FILE) rank 0 shares a fresh secret through it (the weak mode); with
#    RINGLET_JOB_SECRET_FILE the secret must never enter it. Rank 0, once its bench is done and
#    while the agent's store still serves, asks that store as any client could (torch's own
#    TCPStore client) whether the communicator's peer record and its secret are there.
cat >"$work/probe.sh" <<SH
#!/usr/bin/env bash
"$bench" ${bench_args[*]} || exit \$?
[ "\$RANK" = 0 ] || exit 0
exec "$python" - <<'PY'
import datetime, os
import torch.distributed as dist
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                      timeout=datetime.timedelta(seconds=20))
prefix = "ringlet/attempt_0/ringlet/comm1/"
def present(key):  # torch 1.13's Python TCPStore has no check(): a short wait says it
    try:
        store.wait([prefix + key], datetime.timedelta(seconds=2))
        return "present"
    except RuntimeError:
        return "absent"
print("probe: peer record", present("info/0"))
print("probe: secret", present("secret"))
PY
SH
chmod +x "$work/probe.sh"
port=$(free_port)
torchrun --nproc_per_node=2 --master_addr=127.0.0.1 --master_port="$port" --no_python \
  "$work/probe.sh" || fail "no secret: torchrun exited $?"
expect_in_log "probe: peer record present" "no secret (the probe finds the communicator's keys)"
expect_in_log "probe: secret present" "no secret (rank 0 shares one through the agent's store)"
umask 077
"$python" -c "import secrets; print(secrets.token_hex(32))" >"$work/secret"
port=$(free_port)
RINGLET_JOB_SECRET_FILE="$work/secret" torchrun --nproc_per_node=2 --master_addr=127.0.0.1 \
  --master_port="$port" --no_python "$work/probe.sh" || fail "secret file: torchrun exited $?"
expect_in_log "probe: peer record present" "secret file (the probe finds the communicator's keys)"
expect_in_log "probe: secret absent" "secret file (the secret entered the agent's store)"
grep -q "no job secret given" "$work/log" && fail "secret file: a rank made a secret of its own"
echo "ok: under torchrun a secret file keeps the secret out of the agent's store"
