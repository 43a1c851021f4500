#!/usr/bin/env bash
# ringlet vs Open MPI, side by side in the same processes (ringlet-bench --vs-mpi under mpirun),
# for every operation: each ringlet call next to its MPI counterpart on the same buffers
# (MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall,
# MPI_Gather, MPI_Scatter, MPI_Barrier, MPI_Sendrecv).
#
# For N in $RANKS (default "2 4") and each transport in $TRANSPORTS it runs $OPS (default all),
# float32 sum, from $MINBYTES to $MAXBYTES:
#   ringlet over shm (RINGLET_TRANSPORT=shm)  against MPI's shared-memory path (vader, default)
#   ringlet over tcp (RINGLET_TRANSPORT=tcp)  against MPI over TCP (--mca btl tcp,self, loopback)
# and writes under bench/results/:
#   n<N>-<transport>.txt         the tables (both times, busbw, ratio, memcpy reference)
#   n<N>-<transport>.{json,csv}  machine-readable results
#   <op>-n<N>-<transport>.png    busbw against size: ringlet, MPI and the memcpy reference
#   summary.md                   per operation and run: ratios and busbw at the largest size
#
# Environment knobs: BUILD (build dir, default build), OUT (default bench/results), RANKS, OPS
# (comma list or all), MINBYTES (8), MAXBYTES (32M), ITERS (5, or auto), MIN_TIME_MS (0: time
# each size for at least this long, --min-time-ms), WARMUP (1), WARMUP_MS (20), TRANSPORTS
# ("shm tcp"), ALGO (passed to --algo when set). The results in bench/results: ITERS=auto
# MIN_TIME_MS=100 MAXBYTES=64M (5 iterations of a small size are a few microseconds: noise).
# At the defaults it took about 7 minutes on a busy 2-core machine (load ~10): n2-shm 71 s.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=${OUT:-$ROOT/bench/results}
RANKS=${RANKS:-"2 4"}
OPS=${OPS:-all}
MINBYTES=${MINBYTES:-8}
MAXBYTES=${MAXBYTES:-32M}
ITERS=${ITERS:-5}
MIN_TIME_MS=${MIN_TIME_MS:-0}
WARMUP=${WARMUP:-1}
WARMUP_MS=${WARMUP_MS:-20}
TRANSPORTS=${TRANSPORTS:-"shm tcp"}
ALGO=${ALGO:-}
PYTHON=/usr/bin/python3  # Debian's, which sees python3-matplotlib (not a pyenv one first on PATH)

say() { echo "compare-mpi: $*" >&2; }
die() { echo "ringlet: compare-mpi: $*" >&2; exit 1; }

# Debian packages this script needs, installed only when missing.
need_packages=()
command -v mpirun >/dev/null 2>&1 || need_packages+=(openmpi-bin libopenmpi-dev)
[ -e /usr/include/x86_64-linux-gnu/openmpi/include/mpi.h ] || [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] ||
  command -v mpicc >/dev/null 2>&1 || need_packages+=(libopenmpi-dev)
"$PYTHON" -c "import matplotlib" >/dev/null 2>&1 || need_packages+=(python3-matplotlib)
if [ ${#need_packages[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing ${need_packages[*]} and no apt-get to install them"
  say "installing ${need_packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_packages[@]}" >/dev/null
fi

BENCH=$BUILD/bin/ringlet-bench
# Configure when there is no build yet, or again when MPI was just installed (so that
# find_package(MPI) sees it and ringlet-bench gets its --vs-mpi half).
if [ ! -f "$BUILD/CMakeCache.txt" ] || [[ " ${need_packages[*]} " == *" libopenmpi-dev "* ]]; then
  say "configuring $BUILD"
  cmake -S "$ROOT" -B "$BUILD" >/dev/null
fi
say "building ringlet-bench in $BUILD"
cmake --build "$BUILD" --target ringlet-bench >/dev/null

mkdir -p "$OUT"
MPIRUN=(mpirun --allow-run-as-root)
cores=$(nproc)

mpi_args_for() {  # MPI's path that corresponds to ringlet's transport
  case $1 in
    shm) ;;  # Debian's default: ob1 with vader (shared memory)
    tcp) echo "--mca btl tcp,self --mca btl_tcp_if_include lo" ;;
  esac
}

bench_args=(--ops "$OPS" -b "$MINBYTES" -e "$MAXBYTES" -n "$ITERS" -w "$WARMUP"
            --warmup-ms "$WARMUP_MS" --min-time-ms "$MIN_TIME_MS" --vs-mpi)
[ -n "$ALGO" ] && bench_args+=(--algo "$ALGO")

runs=()
for n in $RANKS; do
  extra=()
  [ "$n" -gt "$cores" ] && extra+=(--oversubscribe)
  for transport in $TRANSPORTS; do
    name=n$n-$transport
    # shellcheck disable=SC2207
    mpi_args=($(mpi_args_for "$transport"))
    run=("${MPIRUN[@]}" "${extra[@]}" -np "$n" "${mpi_args[@]}" -x RINGLET_TRANSPORT="$transport"
         -x RINGLET_TIMEOUT=120 "$BENCH")
    # Probe: is this transport built, are the options right? (a tiny run; its error says why not)
    if ! probe=$("${run[@]}" --ops "$OPS" -b 8 -e 8 -n 1 -w 0 --warmup-ms 0 2>&1); then
      say "skipping $name: ringlet-bench did not run with the $transport transport:"
      echo "$probe" | grep -m3 "ringlet" >&2 || echo "$probe" | tail -3 >&2
      continue
    fi
    say "running $name: $OPS, $MINBYTES..$MAXBYTES, $ITERS iterations"
    start=$(date +%s)
    "${run[@]}" "${bench_args[@]}" --json "$OUT/$name.json" --csv "$OUT/$name.csv" |
      tee "$OUT/$name.txt"
    say "wrote $OUT/$name.{txt,json,csv} in $(($(date +%s) - start)) s"
    runs+=("$OUT/$name.json")
  done
done
[ ${#runs[@]} -gt 0 ] || die "no run completed"
"$PYTHON" "$ROOT/bench/plot_results.py" "$OUT" "${runs[@]}"
