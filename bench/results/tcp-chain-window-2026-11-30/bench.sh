#!/bin/bash
# ringlet-bench --vs-mpi, rooted 8 and 64 B over TCP, N ranks under load; this build and the one
# before (LD_LIBRARY_PATH=/tmp/oldlib) in turns. Prints op size ringlet_us mpi_us per run.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
N=${N:-4}; R=${R:-3}; OUT=${OUT:-/tmp/ab}
cd /work/main
for r in $(seq $R); do
  for which in after before; do
    extra=(); [[ $which == before ]] && extra=(-x LD_LIBRARY_PATH=/tmp/oldlib)
    scripts/with-cpu-hogs.sh mpirun -np $N --oversubscribe --bind-to none --mca btl tcp,self -x RINGLET_TRANSPORT=tcp "${extra[@]}" build/bin/ringlet-bench --ops broadcast,reduce,gather,scatter -b 8 -e 64 -f 8 -n 20000 --vs-mpi --rounds 3 --json $OUT/n$N-busy-$which-$r.json > $OUT/n$N-busy-$which-$r.txt 2>&1
    echo "$which $r: $(grep -E '^# [a-z]+: algorithm|^ +[0-9]' $OUT/n$N-busy-$which-$r.txt | awk '/^#/{op=$2} !/^#/{printf "%s%s %.1f/%.1f  ", op, $1, $6, $10}')"
  done
done
