#!/bin/bash
# The build before (libringlet of 62513d4 in /tmp/oldlib) and the variant, in turns: N=3,4 broadcast+reduce, 8B-32M, --vs-algos
cd /work/main
for round in 1 2; do
  for build in before after; do
    if [ $build = before ]; then lib=/tmp/oldlib; else lib=$PWD/build/lib; fi
    for n in 3 4; do
      LD_LIBRARY_PATH=$lib build/bin/ringlet-run -n $n build/bin/ringlet-bench --ops broadcast,reduce \
        -b 8 -e 32M -f 4 --vs-algos --rounds 3 --min-time-ms 20 --json bench/results/chain-hops-tried-2026-11-30/n$n-$build-$round.json > bench/results/chain-hops-tried-2026-11-30/n$n-$build-$round.txt 2>&1
    done
  done
done
