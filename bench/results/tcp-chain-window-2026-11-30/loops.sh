#!/bin/bash
# N ranks over TCP under load (HOGS=0: idle): standalone loops of 8-byte calls, ringlet this build
# (build/lib) and the one before (its libringlet.so* copied to /tmp/oldlib), and Open MPI; in turns.
# Build the loops first (README.md).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
N=${N:-4}; OP=${OP:-broadcast}; R=${R:-5}; HOGS=${HOGS:-1}
cd /work/main
wrap() { if [[ $HOGS == 1 ]]; then scripts/with-cpu-hogs.sh "$@"; else "$@"; fi; }
for r in $(seq $R); do
  a=$(wrap mpirun -np $N --oversubscribe --bind-to none --mca btl tcp,self -x RINGLET_TRANSPORT=tcp bench/results/tcp-align-2026-11-30/blocks $OP 40 2>/dev/null | grep "overall" | head -1 | awk '{print $4}')
  b=$(wrap mpirun -np $N --oversubscribe --bind-to none --mca btl tcp,self -x RINGLET_TRANSPORT=tcp -x LD_LIBRARY_PATH=/tmp/oldlib bench/results/tcp-align-2026-11-30/blocks $OP 40 2>/dev/null | grep "overall" | head -1 | awk '{print $4}')
  m=$(wrap mpirun -np $N --oversubscribe --bind-to none --mca btl tcp,self bench/results/tcp-align-2026-11-30/mblocks $OP 80000 2>/dev/null | grep "us/call" | grep MPI | head -1 | awk '{print $5}')
  echo "$OP N=$N round $r: after $a before $b mpi $m"
done
