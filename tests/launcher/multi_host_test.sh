#!/usr/bin/env bash
# ringlet-run across emulated hosts (scripts/emulated-hosts.sh: network namespaces on a bridge,
# each with its own hostname). Exits 77 (skip) when namespaces cannot be made here.
#
#   multi_host_test.sh BIN_DIR collectives HOSTS RANKS_PER_HOST ORDER
#       every collective (ringlet-bench --ops all, small sizes, each checked: #wrong) across
#       HOSTS hosts with RANKS_PER_HOST ranks each, ranks dealt in ORDER (block or cyclic)
#   multi_host_test.sh BIN_DIR streams       2 hosts x 2 ranks (cyclic) with 3 tcp streams per
#       rank pair (RINGLET_SOCKET_STREAMS): collectives and sendrecv up to 4 MiB, striped, checked
#   multi_host_test.sh BIN_DIR launcher      the variables each rank gets, one MASTER_PORT and job
#       id for all, a rank failing on one node stopping the others, and the missing-secret error
#   multi_host_test.sh BIN_DIR link-down     host 1's link cut mid-run: every rank ends with a
#       named error, every launcher exits non-zero, nothing hangs
#   multi_host_test.sh BIN_DIR kill-host     host 2's ranks SIGKILLed mid-run: the same
#   multi_host_test.sh BIN_DIR slurm         ranks started as srun starts them (SLURM_* only, no
#       MASTER_ADDR): the first host of SLURM_NODELIST hosts the store
#   multi_host_test.sh BIN_DIR mpirun        Open MPI's mpirun on host 0 launching 2 hosts x 2 ranks
#       (scripts/emulated-rsh.sh as its ssh): ringlet-bench --vs-mpi, a program without MPI, and
#       the refusals without a secret and without MASTER_ADDR
#   multi_host_test.sh BIN_DIR trace         RINGLET_TRACE on 2 hosts x 2 ranks: the clock offsets
#       measured at creation, and ringlet-trace merge placing the other host's ranks by them
set -u
bin="$1"
mode="$2"
shift 2
here="$(cd "$(dirname "$0")" && pwd)"
emulate="$here/../../scripts/emulated-hosts.sh"
work="$(mktemp -d /tmp/ringlet-multihost.XXXXXX)"
[[ -n "${KEEP_WORK:-}" ]] || trap 'rm -rf "$work"' EXIT
secret="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export RINGLET_JOB_SECRET="$secret" BIN="$bin" WORK="$work"

fail() { echo "FAIL: $*" >&2; exit 1; }

# Runs scripts/emulated-hosts.sh; a skip there skips this test.
emulate() {
  "$emulate" "$@"
  local status=$?
  if (( status == 77 )); then echo "skipped: emulated hosts unavailable" >&2; exit 77; fi
  return "$status"
}

# Each host's ringlet-run, output to $WORK/host<i>.log. $1: ranks per host, rest: its options.
run_line='"$BIN/ringlet-run" --nnodes "$EMU_HOSTS" --node-rank "$EMU_NODE" \
  --master-addr "$EMU_MASTER_ADDR" --master-port 29511 --grace 2'

# Every rank 0..N-1 has a line in the logs naming an error ("[r] ringlet: ..." with a cause).
expect_named_error_on_every_rank() {
  local world="$1" r
  for ((r = 0; r < world; r++)); do
    grep -hE "^\[$r\] ringlet: .*(rank [0-9]+|peer|timed out|connection)" "$work"/host*.log \
      >/dev/null || { cat "$work"/host*.log >&2; fail "rank $r did not report a named error"; }
  done
}

# 2 hosts x 2 ranks (cyclic) under the variables $1: every collective and sendrecv from 8 B to
# $2, checked; some link's log line must match $3 (else: "no tcp link $4").
striped_bench() {
  local vars="$1" largest="$2" pattern="$3" what="$4" status
  emulate --hosts 2 --timeout 90 -- "RINGLET_TIMEOUT=20 RINGLET_DEBUG=INFO $vars \
    $run_line -n 2 --rank-order cyclic \"\$BIN/ringlet-bench\" \
    --ops allreduce,reducescatter,allgather,broadcast,alltoall,sendrecv -b 8 -e $largest -f 8 \
    -n 2 -w 1 >\"\$WORK/host\$EMU_NODE.log\" 2>&1"
  status=$?
  cat "$work"/host0.log
  (( status == 0 )) || { cat "$work"/host*.log >&2; fail "a host exited with status $status"; }
  grep -hq "$pattern" "$work"/host*.log || { cat "$work"/host*.log >&2; fail "no tcp link $what"; }
  grep -q "Out of bounds values : 0 OK" "$work/host0.log" || fail "ringlet-bench found wrong data"
}

case "$mode" in
streams)
  striped_bench "RINGLET_SOCKET_STREAMS=3" 4M "tcp .* and 2 more streams" "reported its 3 streams"
  ;;
sealed)
  # Every link's bytes sealed across the hosts (RINGLET_SOCKET_ENCRYPT=1 from the launchers'
  # environment), with striped streams too; then the two hosts disagreeing: a named error.
  striped_bench "RINGLET_SOCKET_ENCRYPT=1 RINGLET_SOCKET_STREAMS=2" 1M \
    "tcp .* and 1 more streams, sealed (AES-256-GCM)" "reported itself sealed"
  emulate --hosts 2 --timeout 90 -- "RINGLET_TIMEOUT=10 \
    RINGLET_SOCKET_ENCRYPT=\$EMU_NODE $run_line -n 1 \"\$BIN/ringlet-bench\" --ops allreduce \
    -b 8 -e 8 -n 2 -w 1 >\"\$WORK/mixed\$EMU_NODE.log\" 2>&1"
  status=$?
  (( status != 0 )) || { cat "$work"/mixed*.log >&2; fail "hosts that seal and do not ran"; }
  grep -hq "RINGLET_SOCKET_ENCRYPT alike on every rank" "$work"/mixed*.log ||
    { cat "$work"/mixed*.log >&2; fail "the disagreement was not named"; }
  # The other way round: node 0's launcher hosts a sealing store, which refuses node 1's
  # launcher (it does not seal) by name.
  emulate --hosts 2 --timeout 90 -- "RINGLET_TIMEOUT=10 \
    RINGLET_SOCKET_ENCRYPT=\$((1 - EMU_NODE)) $run_line -n 1 \"\$BIN/ringlet-bench\" \
    --ops allreduce -b 8 -e 8 -n 2 -w 1 >\"\$WORK/store\$EMU_NODE.log\" 2>&1"
  status=$?
  (( status != 0 )) || { cat "$work"/store*.log >&2; fail "a clear launcher joined a sealing store"; }
  grep -q "does not seal its store connection" "$work/store1.log" ||
    { cat "$work"/store*.log >&2; fail "the store's refusal was not named on node 1"; }
  ;;
collectives)
  hosts="$1" ranks="$2" order="$3"
  start=$(date +%s)
  emulate --hosts "$hosts" --timeout 60 -- "RINGLET_TIMEOUT=20 RINGLET_DEBUG=INFO \
    $run_line -n $ranks --rank-order $order \"\$BIN/ringlet-bench\" --ops all -b 8 -e 32K -f 8 \
    -n 2 -w 1 >\"\$WORK/host\$EMU_NODE.log\" 2>&1"
  status=$?
  cat "$work"/host0.log
  (( status == 0 )) || { cat "$work"/host*.log >&2; fail "a host exited with status $status"; }
  world=$((hosts * ranks))
  grep -q "world $world\b\|nranks $world\b\|$world ranks" "$work/host0.log" ||
    grep -qE "(ranks|size)[ :=]+$world\b" "$work/host0.log" ||
    fail "ringlet-bench did not report a world of $world"
  # Ranks on different hosts talk TCP; ranks on one host (RANKS_PER_HOST 2) shared memory.
  grep -hq "tcp" "$work"/host*.log || fail "no rank reported a tcp link"
  if (( ranks > 1 )); then grep -hq "shm" "$work"/host*.log || fail "no shm link on one host"; fi
  if [[ "$order" == cyclic && "$ranks" -gt 1 ]]; then
    # Dealt cyclically, the rings of all-reduce, reduce-scatter and all-gather, the chains of
    # broadcast and reduce and the pairwise steps of all-to-all and all-to-all-v run in host order
    # (each host entered once); ringlet-bench checks every result.
    emulate --hosts "$hosts" --timeout 60 -- "RINGLET_TIMEOUT=20 RINGLET_DEBUG=INFO \
      $run_line -n $ranks --rank-order cyclic \"\$BIN/ringlet-bench\" \
      --ops allreduce,reducescatter,allgather,alltoall,alltoallv \
      --algo allreduce:ring,reducescatter:ring,allgather:ring,alltoall:pairwise \
      -b 8 -e 1M -f 16 -n 2 -w 1 \
      >\"\$WORK/ring\$EMU_NODE.log\" 2>&1" ||
      { cat "$work"/ring*.log >&2; fail "the host-ordered rings failed"; }
    # The chains from a root other than rank 0, and from the last rank.
    for root in 1 $((world - 1)); do
      emulate --hosts "$hosts" --timeout 60 -- "RINGLET_TIMEOUT=20 \
        $run_line -n $ranks --rank-order cyclic \"\$BIN/ringlet-bench\" --ops broadcast,reduce \
        --algo chain --root $root -b 8 -e 1M -f 16 -n 2 -w 1 \
        >\"\$WORK/chain\$EMU_NODE.log\" 2>&1" ||
        { cat "$work"/chain*.log >&2; fail "the host-ordered chains from root $root failed"; }
    done
    expected=""
    for ((h = 0; h < hosts; h++)); do
      for ((l = 0; l < ranks; l++)); do expected+="$((l * hosts + h)) "; done
    done
    grep -q "ring all-reduce in host order (ranks ${expected% })" "$work/ring0.log" ||
      { cat "$work/ring0.log" >&2; fail "the ring all-reduce is not in host order (${expected% })"; }
  fi
  if (( ranks > 1 )); then
    # Host-aware log-step schedules: Rabenseifner on the ranks dealt over hosts (its largest
    # halvings inside a host: a reordering in block order), the trees of broadcast and reduce in
    # host order (a reordering in cyclic order), from roots 1 and the last rank.
    for root in 1 $((world - 1)); do
      emulate --hosts "$hosts" --timeout 60 -- "RINGLET_TIMEOUT=20 RINGLET_DEBUG=INFO \
        $run_line -n $ranks --rank-order $order \"\$BIN/ringlet-bench\" \
        --ops allreduce,broadcast,reduce --algo allreduce:rabenseifner,broadcast:tree,reduce:tree \
        --root $root -b 8 -e 1M -f 16 -n 2 -w 1 >\"\$WORK/tree\$EMU_NODE.log\" 2>&1" ||
        { cat "$work"/tree*.log >&2; fail "rabenseifner and the trees from root $root failed"; }
      grep -q "Out of bounds values : 0 OK" "$work/tree0.log" ||
        { cat "$work/tree0.log" >&2; fail "rabenseifner or a tree gave wrong data"; }
      grep -q "allreduce: algorithm rabenseifner (forced)" "$work/tree0.log" ||
        { cat "$work/tree0.log" >&2; fail "rabenseifner was not the algorithm run"; }
    done
    if [[ "$order" == block ]]; then
      expected=""
      for ((l = 0; l < ranks; l++)); do
        for ((h = 0; h < hosts; h++)); do expected+="$((h * ranks + l)) "; done
      done
      grep -q "recursive halving on ranks dealt over hosts (ranks ${expected% })" \
        "$work/tree0.log" ||
        { cat "$work/tree0.log" >&2; fail "the halving is not on ranks dealt over hosts"; }
    fi
    # All-gather, reduce-scatter, all-reduce and the v-forms in two levels
    # (collectives/hierarchical.cc), forced, in several types and reductions; ringlet-bench
    # checks every size.
    for pair in "float32 sum" "float16 avg" "int32 max"; do
      read -r dtype redop <<<"$pair"
      emulate --hosts "$hosts" --timeout 60 -- "RINGLET_TIMEOUT=20 \
        $run_line -n $ranks --rank-order $order \"\$BIN/ringlet-bench\" \
        --ops allgather,reducescatter,allreduce,allgatherv,reducescatterv --algo hierarchical \
        -d $dtype -o $redop -b 8 -e 1M -f 16 -n 2 -w 1 >\"\$WORK/two\$EMU_NODE.log\" 2>&1" ||
        { cat "$work"/two*.log >&2; fail "the two-level schedules failed ($dtype $redop)"; }
      grep -q "Out of bounds values : 0 OK" "$work/two0.log" ||
        { cat "$work/two0.log" >&2; fail "the two-level schedules gave wrong data ($pair)"; }
      for op in reducescatter allreduce allgatherv; do
        grep -q "$op: algorithm hierarchical (forced)" "$work/two0.log" ||
          { cat "$work/two0.log" >&2; fail "the two-level $op was not the one run"; }
      done
    done
  fi
  echo "ok: ${hosts} hosts x ${ranks} ranks ($order) in $(( $(date +%s) - start )) s"
  ;;
launcher)
  # 1. The variables: block order, 2 hosts x 2 ranks.
  emulate --hosts 2 --timeout 30 -- "$run_line -n 2 sh -c 'echo \"vars RANK=\$RANK \
LOCAL_RANK=\$LOCAL_RANK WORLD_SIZE=\$WORLD_SIZE LOCAL_WORLD_SIZE=\$LOCAL_WORLD_SIZE \
GROUP_RANK=\$GROUP_RANK NODE_RANK=\$NODE_RANK HOST=\$(hostname) MASTER=\$MASTER_ADDR:\$MASTER_PORT \
STORE=\$RINGLET_STORE_ADDR JOB=\$RINGLET_JOB_ID SECRET=\$RINGLET_JOB_SECRET\"' \
    >\"\$WORK/host\$EMU_NODE.log\" 2>&1" || { cat "$work"/host*.log >&2; fail "env run failed"; }
  cat "$work"/host*.log
  for spec in "0 0 0" "1 1 0" "2 0 1" "3 1 1"; do
    read -r rank local node <<<"$spec"
    grep -q "^\[$rank\] vars RANK=$rank LOCAL_RANK=$local WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 \
GROUP_RANK=$node NODE_RANK=$node HOST=emuhost$node MASTER=10.231.0.1:[0-9]* \
STORE=10.231.0.1:29511 JOB=[^ ]* SECRET=$secret$" "$work/host$node.log" ||
      fail "rank $rank's variables are wrong"
  done
  (( $(grep -ho "MASTER=[^ ]*" "$work"/host*.log | sort -u | wc -l) == 1 )) ||
    fail "the ranks were given different MASTER_PORTs"
  (( $(grep -ho "JOB=[^ ]*" "$work"/host*.log | sort -u | wc -l) == 1 )) ||
    fail "the ranks were given different job ids"
  # 2. Cyclic order: node i holds ranks i, i+M.
  emulate --hosts 2 --timeout 30 -- "$run_line -n 2 --rank-order cyclic sh -c 'echo \
\"cyclic RANK=\$RANK LOCAL_RANK=\$LOCAL_RANK GROUP_RANK=\$GROUP_RANK\"' \
    >\"\$WORK/host\$EMU_NODE.log\" 2>&1" || fail "cyclic run failed"
  grep -q "^\[2\] cyclic RANK=2 LOCAL_RANK=1 GROUP_RANK=0$" "$work/host0.log" ||
    { cat "$work"/host*.log >&2; fail "cyclic order: rank 2 is not node 0's second rank"; }
  # 3. A rank failing on node 1 stops node 0's sleeping ranks within seconds.
  start=$(date +%s)
  emulate --hosts 2 --timeout 60 -- "$run_line -n 1 sh -c 'if [ \$GROUP_RANK = 1 ]; then \
sleep 1; exit 3; fi; exec sleep 50' >\"\$WORK/host\$EMU_NODE.log\" 2>&1"
  status=$?
  took=$(( $(date +%s) - start ))
  cat "$work"/host*.log
  (( status != 0 )) || fail "the job succeeded although a rank failed"
  grep -q "ringlet: rank 1 (pid [0-9]*) exited with status 3" "$work/host1.log" ||
    fail "node 1 did not name its failed rank"
  grep -q "ringlet: the job failed on node 1: rank 1 (pid [0-9]*) exited with status 3; stopped 1 rank" \
    "$work/host0.log" || fail "node 0 did not stop its rank naming node 1's failure"
  (( took < 20 )) || fail "stopping across nodes took $took s"
  # 4. Several nodes without a shared secret: a clear error, before anything starts.
  out="$(env -u RINGLET_JOB_SECRET "$bin/ringlet-run" --nnodes 2 --node-rank 0 \
    --master-addr 127.0.0.1 -n 1 true 2>&1)"
  status=$?
  (( status == 2 )) || fail "missing secret: exit status $status, expected 2"
  [[ "$out" == "ringlet: --nnodes 2 needs the same job secret on every node"* ]] ||
    fail "missing secret: unexpected message: $out"
  # 5. The interface: chosen by the route to the master, or RINGLET_SOCKET_IFNAME; ringlet-info
  #    says which and why, and links between hosts use it.
  emulate --hosts 2 --timeout 30 -- "\"\$BIN/ringlet-info\" --master \$EMU_MASTER_ADDR \
    >\"\$WORK/info\$EMU_NODE.txt\" 2>&1; RINGLET_SOCKET_IFNAME=eth0 \"\$BIN/ringlet-info\" \
    >>\"\$WORK/info\$EMU_NODE.txt\" 2>&1; RINGLET_SOCKET_IFNAME=nosuch0 \"\$BIN/ringlet-info\" \
    >>\"\$WORK/info\$EMU_NODE.txt\" 2>&1; RINGLET_SOCKET_IFNAME=eth0 RINGLET_DEBUG=INFO \
    $run_line -n 1 \"\$BIN/ringlet-bench\" -b 4K -e 4K -n 1 -w 1 >\"\$WORK/host\$EMU_NODE.log\" 2>&1" ||
    { cat "$work"/host*.log >&2; fail "RINGLET_SOCKET_IFNAME=eth0 run failed"; }
  grep -q "between hosts: tcp on 10.231.0.2 (interface eth0), because it routes to the \
rendezvous address 10.231.0.1" "$work/info1.txt" || { cat "$work/info1.txt" >&2; fail "info: route"; }
  grep -q "between hosts: tcp on 10.231.0.1 (interface eth0), because RINGLET_SOCKET_IFNAME=eth0" \
    "$work/info0.txt" || fail "ringlet-info does not name RINGLET_SOCKET_IFNAME"
  grep -q "between hosts: tcp; no usable interface: .*nosuch0" "$work/info0.txt" ||
    fail "ringlet-info does not name the missing interface"
  grep -q "rank 1: tcp (.*): tcp 10.231.0.1:[0-9]* -> 10.231.0.2:[0-9]*" "$work/host0.log" ||
    { cat "$work/host0.log" >&2; fail "the link between hosts is not on eth0's addresses"; }
  echo "ok: launcher across hosts"
  ;;
slurm)
  # 2 hosts x 2 tasks, with the variables srun gives each task; no MASTER_ADDR or MASTER_PORT.
  emulate --hosts 2 --timeout 60 -- 'pids=""; for l in 0 1; do \
    SLURM_PROCID=$((EMU_NODE * 2 + l)) SLURM_NTASKS=4 SLURM_LOCALID=$l SLURM_NODEID=$EMU_NODE \
    SLURM_TASKS_PER_NODE="2(x2)" SLURM_NODELIST="emuhost[0-1]" SLURM_JOB_ID=4242 \
    SLURM_STEP_ID=0 RINGLET_TIMEOUT=20 RINGLET_DEBUG=INFO "$BIN/ringlet-bench" \
    --ops allreduce,allgather -b 8 -e 4K -f 8 -n 2 -w 1 \
    >"$WORK/task$((EMU_NODE * 2 + l)).log" 2>&1 & pids="$pids $!"; done; \
    for p in $pids; do wait $p || exit 1; done'
  status=$?
  cat "$work"/task*.log
  (( status == 0 )) || fail "a host exited with status $status"
  grep -q "rank 0 of 4 (slurm) hosts the store on emuhost0:" "$work/task0.log" ||
    fail "rank 0 did not host the store on the node list's first host"
  grep -q "world size 4, bootstrap slurm" "$work/task0.log" || fail "not a world of 4 from slurm"
  grep -q "rank 0 -> rank 2: tcp" "$work/task0.log" || fail "no tcp link between the hosts"
  echo "ok: slurm across hosts"
  ;;
mpirun)
  # Open MPI's own launch across hosts: mpirun on host 0 starts its daemon on host 1 through
  # scripts/emulated-rsh.sh (ssh's part), 2 hosts x 2 ranks, with only what the README asks for
  # (-x MASTER_ADDR, -x RINGLET_JOB_SECRET; no MASTER_PORT).
  command -v mpirun >/dev/null || { echo "skipped: no mpirun (apt-get install openmpi-bin)"; exit 77; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RSH="$here/../../scripts/emulated-rsh.sh"
  mpi_line='[ "$EMU_NODE" = 0 ] || exit 0; RINGLET_TIMEOUT=20 RINGLET_DEBUG=INFO timeout -k 5 50 \
    mpirun --mca plm_rsh_agent "$RSH" -H emuhost0:2,emuhost1:2 -np 4 -x MASTER_ADDR=emuhost0 \
    -x RINGLET_TIMEOUT -x RINGLET_DEBUG'
  # 1. ringlet-bench beside Open MPI's own calls (MPI_Init, then ringlet's store on a port rank 0
  #    picked and broadcast), every value checked.
  emulate --hosts 2 --timeout 60 -- "$mpi_line -x RINGLET_JOB_SECRET \"\$BIN/ringlet-bench\" \
    --ops allreduce,allgather,broadcast,alltoall -b 8 -e 32K -f 8 -n 2 -w 1 --vs-mpi \
    >\"\$WORK/host0.log\" 2>&1"
  status=$?
  cat "$work/host0.log"
  (( status == 0 )) || fail "mpirun with ringlet-bench exited with status $status"
  grep -q "world size 4, bootstrap openmpi" "$work/host0.log" || fail "not a world of 4 from mpirun"
  grep -q "Out of bounds values : 0 OK" "$work/host0.log" || fail "ringlet-bench found wrong data"
  grep -q "^# vs MPI: Open MPI" "$work/host0.log" || fail "Open MPI's calls did not run beside"
  grep -q "\[emuhost1:[0-9]*\] rank 2 -> rank 0: tcp" "$work/host0.log" ||
    fail "rank 2 did not run on emuhost1 with a tcp link to rank 0"
  grep -q "\[emuhost0:[0-9]*\] rank 0 -> rank 1: shm" "$work/host0.log" ||
    fail "ranks 0 and 1 did not share emuhost0 over shared memory"
  echo "ok: mpirun across hosts, ringlet-bench beside Open MPI"
  # 2. A program without MPI: the library alone reads Open MPI's variables and derives the
  #    store's port from the job id.
  emulate --hosts 2 --timeout 60 -- "$mpi_line -x RINGLET_JOB_SECRET \
    \"\$BIN/ringlet-teach-allreduce\" 30000 >\"\$WORK/host0.log\" 2>&1"
  status=$?
  cat "$work/host0.log"
  (( status == 0 )) || fail "mpirun with ringlet-teach-allreduce exited with status $status"
  [[ $(grep -c "the teaching ring agrees with the library" "$work/host0.log") == 4 ]] ||
    fail "not every rank's teaching ring matched the library's all-reduce"
  grep -q "rank 0 of 4 (openmpi) hosts the store on emuhost0:" "$work/host0.log" ||
    fail "rank 0 did not host the store on emuhost0"
  echo "ok: mpirun across hosts, a program without MPI"
  # 3. No secret: an address off loopback and no RINGLET_JOB_SECRET is refused by name, and
  #    mpirun ends.
  emulate --hosts 2 --timeout 60 -- "unset RINGLET_JOB_SECRET; $mpi_line \
    \"\$BIN/ringlet-teach-allreduce\" 30000 >\"\$WORK/host0.log\" 2>&1"
  status=$?
  cat "$work/host0.log"
  (( status != 0 && status != 124 )) || fail "mpirun without a secret exited with status $status"
  # (mpirun stops the other ranks once one exits non-zero: not every rank may get to say it.)
  grep -q "^ringlet: MASTER_ADDR=emuhost0 is not a loopback address and no job secret is set" \
    "$work/host0.log" || fail "no rank named the missing secret"
  echo "ok: mpirun across hosts without a secret is refused by name"
  # 4. No MASTER_ADDR: Open MPI says the job spans hosts, and no rank guesses an address.
  emulate --hosts 2 --timeout 60 -- "${mpi_line/-x MASTER_ADDR=emuhost0/} -x RINGLET_JOB_SECRET \
    \"\$BIN/ringlet-teach-allreduce\" 30000 >\"\$WORK/host0.log\" 2>&1"
  status=$?
  cat "$work/host0.log"
  (( status != 0 && status != 124 )) || fail "mpirun without MASTER_ADDR exited with status $status"
  grep -q "^ringlet: MASTER_ADDR is not set and the openmpi job spans several hosts (4 ranks, 2 on \
this host)" "$work/host0.log" || fail "no rank named the missing MASTER_ADDR"
  echo "ok: mpirun across hosts without MASTER_ADDR is refused by name"
  ;;
trace)
  # The emulated hosts share one kernel, so one monotonic clock: every measured offset to rank
  # 0's clock must lie within its uncertainty of 0, over tcp between the hosts and shm inside one.
  emulate --hosts 2 --timeout 60 -- "RINGLET_TIMEOUT=20 RINGLET_TRACE=\"\$WORK/t\" \
    $run_line -n 2 \"\$BIN/ringlet-teach-allreduce\" 30000 >\"\$WORK/host\$EMU_NODE.log\" 2>&1"
  status=$?
  (( status == 0 )) || { cat "$work"/host*.log >&2; fail "a host exited with status $status"; }
  /usr/bin/python3 - "$work" "$bin/ringlet-trace" <<'PY' || fail "clock offsets across hosts"
import json, subprocess, sys
work, tool = sys.argv[1], sys.argv[2]
files = [f"{work}/t.rank{r}.json" for r in range(4)]
other = [json.load(open(f))["otherData"] for f in files]
assert len({o["host"] for o in other}) == 2, [o["host"] for o in other]
for r, o in enumerate(other):
    offset, uncertainty = o["clock_offset_to_rank0_ns"], o["clock_offset_uncertainty_ns"]
    print(f"rank {r} ({o['host'].split('/')[0]}): offset {offset} ns +- {uncertainty} ns")
    if r > 0:
        assert abs(offset) <= uncertainty and uncertainty > 0 and abs(offset) < 5_000_000, o
subprocess.run([sys.executable, tool, "merge", *files, "-o", f"{work}/merged.json"],
               check=True)
clock = json.load(open(f"{work}/merged.json"))["otherData"]["clock"]
print(clock)
assert clock.startswith("measured offsets to rank 0"), clock
PY
  echo "ok: trace clocks across hosts"
  ;;
link-down | kill-host)
  hosts=3
  ranks=$([[ "$mode" == link-down ]] && echo 1 || echo 2)
  if [[ "$mode" == link-down ]]; then
    control='sleep 3; ip netns exec "$EMU_SWITCH_NS" ip link set p1 down'
  else
    # Both of the host's ranks in one kill: one at a time (a `cat` apart), the second could see
    # the first gone and exit on its own first, and its launcher would name that exit instead.
    # Both must have started: on a busy machine (the suite runs tests side by side) starting
    # them can take longer than the 3 s the job runs before the kill.
    control='for i in $(seq 1 200); do victims=; for p in $(ip netns pids "${EMU_NS_PREFIX}h2"); do
      [ "$(cat /proc/$p/comm 2>/dev/null)" = ringlet-bench ] && victims="$victims $p"; done
      [ $(echo $victims | wc -w) -ge 2 ] && break; sleep 0.1; done
      sleep 3; kill -KILL $victims'
  fi
  start=$(date +%s)
  emulate --hosts "$hosts" --timeout 60 --control "$control" -- "RINGLET_TIMEOUT=3 \
    $run_line -n $ranks \"\$BIN/ringlet-bench\" --ops allreduce -b 64K -e 64K -n 1000000 -w 1 \
    >\"\$WORK/host\$EMU_NODE.log\" 2>&1"
  status=$?
  took=$(( $(date +%s) - start ))
  cat "$work"/host*.log
  (( status != 0 && status != 124 )) || fail "status $status: expected a failure, not a hang"
  (( took < 40 )) || fail "the job took $took s to end"
  for ((i = 0; i < hosts; i++)); do
    grep -q "^ringlet: " "$work/host$i.log" || fail "host $i's ringlet-run said nothing"
  done
  if [[ "$mode" == kill-host ]]; then
    grep -q "ringlet: rank [45] (pid [0-9]*) was killed by signal 9" "$work/host2.log" ||
      fail "node 2 did not name its killed rank"
    expect_named_error_on_every_rank 4  # the ranks of hosts 0 and 1
  else
    expect_named_error_on_every_rank "$hosts"
  fi
  echo "ok: $mode ended in $took s"
  ;;
*)
  fail "unknown mode '$mode'"
  ;;
esac
