#!/bin/bash
# A/B in one build (a temporary switch, TMP_CHAINRUN=0: the chain's frames sent one by one as
# before): small rooted calls on 3 and 4 ranks over TCP beside Open MPI, idle and under load, in
# turns; and the patterns of ../tcp-runs-2026-11-30/pingpong.cc (built as /tmp/pingpong) on 4
# ranks. Output: this directory, or the first argument.
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RINGLET_TRANSPORT=tcp
out=${1:-bench/results/tcp-chain-runs-2026-11-30}
for round in $(seq ${ROUNDS:-5}); do
  for sw in 0 1; do
    for n in 3 4; do
      for load in idle busy; do
        pre=""; [ $load = busy ] && pre="scripts/with-cpu-hogs.sh"
        TMP_CHAINRUN=$sw timeout 300 $pre mpirun -np $n --oversubscribe --bind-to none \
          --mca btl tcp,self -x RINGLET_TRANSPORT -x TMP_CHAINRUN build/bin/ringlet-bench \
          --ops broadcast,reduce,gather,scatter -b 8 -e 64 -f 8 -n 5000 --vs-mpi --rounds 3 \
          --json $out/n$n-$load-$sw-$round.json > $out/n$n-$load-$sw-$round.txt 2>&1
      done
    done
    for load in idle busy; do
      pre=""; [ $load = busy ] && pre="scripts/with-cpu-hogs.sh"
      echo "$load $sw $(TMP_CHAINRUN=$sw $pre build/bin/ringlet-run -n 4 /tmp/pingpong 2>&1 |
        grep us/iter | awk '{print $(NF-1)}' | tr '\n' ' ')" >> $out/pingpong.txt
    done
  done
done
