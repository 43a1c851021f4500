#!/bin/bash
# A/B: the build before (HEAD a6ba91a, /tmp/oldtree) and after, alternating; rooted 8-64 B over TCP.
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RINGLET_TRANSPORT=tcp
out=bench/results/tcp-runs-2026-11-30
for round in 1 2 3; do
  for build in before after; do
    if [ $build = before ]; then bin=/tmp/oldtree/build/bin; else bin=build/bin; fi
    for load in idle busy; do
      pre=""; [ $load = busy ] && pre="scripts/with-cpu-hogs.sh"
      $pre mpirun -np 2 --mca btl tcp,self -x RINGLET_TRANSPORT $bin/ringlet-bench \
        --ops broadcast,reduce,gather,scatter,allreduce -b 8 -e 64 -f 8 -n 20000 --vs-mpi --rounds 3 \
        --json $out/$load-$build-$round.json > $out/$load-$build-$round.txt 2>&1
    done
  done
done
