#!/bin/bash
# A/B: the build before (libringlet of 62513d4, MSG_MORE and a look after each write, copied to
# /tmp/oldlib) and after (Nagle's algorithm for the frames of a run), in turns; rooted 8-64 B
# over TCP beside Open MPI, idle and under load, and the ping-pong patterns of
# ../tcp-runs-2026-11-30/pingpong.cc (built as /tmp/pingpong). switch/ holds the first A/B, made
# with a temporary switch between the two in one build. The output directory is the first
# argument, default this one (../tcp-quickack-2026-11-30 ran the same loop for its variant);
# ROUNDS (default 3) sets the rounds, OLDLIB (default /tmp/oldlib) the build before's library.
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RINGLET_TRANSPORT=tcp
out=${1:-bench/results/tcp-nagle-2026-11-30}
for round in $(seq ${ROUNDS:-3}); do
  for build in before after; do
    if [ $build = before ]; then lib=${OLDLIB:-/tmp/oldlib}; else lib=$PWD/build/lib; fi
    for load in idle busy; do
      pre=""; [ $load = busy ] && pre="scripts/with-cpu-hogs.sh"
      LD_LIBRARY_PATH=$lib $pre mpirun -np 2 --mca btl tcp,self -x RINGLET_TRANSPORT -x LD_LIBRARY_PATH \
        build/bin/ringlet-bench --ops broadcast,reduce,gather,scatter -b 8 -e 64 -f 8 -n 20000 \
        --vs-mpi --rounds 3 --json $out/$load-$build-$round.json > $out/$load-$build-$round.txt 2>&1
      echo "$load $build $(LD_LIBRARY_PATH=$lib $pre build/bin/ringlet-run -n 2 /tmp/pingpong 2>&1 |
        grep us/iter | awk '{print $(NF-1)}' | tr '\n' ' ')" >> $out/pingpong.txt
    done
  done
done
