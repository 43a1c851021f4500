#!/usr/bin/env bash
# ringlet vs Open MPI, side by side in the same processes (ringlet-bench --vs-mpi under mpirun).
#
# For N in $RANKS (default "2 4") it runs float32 sum all-reduce from 8 B to $MAXBYTES:
#   ringlet over shm (RINGLET_TRANSPORT=shm)  against MPI's shared-memory path (vader, default)
#   ringlet over tcp (RINGLET_TRANSPORT=tcp)  against MPI over TCP (--mca btl tcp,self, loopback)
# and writes, per run, under bench/results/:
#   allreduce-n<N>-<transport>.txt   the table (both times, busbw, ratio = MPI time / ringlet time)
#   allreduce-n<N>-<transport>.json  machine-readable results
#   allreduce-n<N>-<transport>.csv   the same, for the plot
#   allreduce-n<N>-<transport>.png   busbw against size, ringlet and MPI, log-x
#
# Environment knobs: BUILD (build dir, default build), OUT (default bench/results), RANKS,
# MINBYTES (8), MAXBYTES (256M), ITERS (5), WARMUP (1), TRANSPORTS ("shm tcp").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=${OUT:-$ROOT/bench/results}
RANKS=${RANKS:-"2 4"}
MINBYTES=${MINBYTES:-8}
MAXBYTES=${MAXBYTES:-256M}
ITERS=${ITERS:-5}
WARMUP=${WARMUP:-1}
TRANSPORTS=${TRANSPORTS:-"shm tcp"}

say() { echo "compare-mpi: $*" >&2; }
die() { echo "ringlet: compare-mpi: $*" >&2; exit 1; }

# Debian packages this script needs, installed only when missing.
need_packages=()
command -v mpirun >/dev/null 2>&1 || need_packages+=(openmpi-bin libopenmpi-dev)
[ -e /usr/include/x86_64-linux-gnu/openmpi/include/mpi.h ] || [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] ||
  command -v mpicc >/dev/null 2>&1 || need_packages+=(libopenmpi-dev)
command -v gnuplot >/dev/null 2>&1 || need_packages+=(gnuplot-nox)
if [ ${#need_packages[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing ${need_packages[*]} and no apt-get to install them"
  say "installing ${need_packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_packages[@]}" >/dev/null
fi

BENCH=$BUILD/bin/ringlet-bench
# Configure when there is no build yet, or again when MPI was just installed (so that
# find_package(MPI) sees it and ringlet-bench gets its --vs-mpi half).
if [ ! -f "$BUILD/CMakeCache.txt" ] || [ ${#need_packages[@]} -gt 0 ]; then
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
mpi_label_for() {
  case $1 in
    shm) echo "Open MPI (vader shared memory)" ;;
    tcp) echo "Open MPI (TCP, loopback)" ;;
  esac
}

plot() {  # plot CSV PNG TITLE RINGLET_LABEL MPI_LABEL
  gnuplot <<GNUPLOT
set terminal pngcairo size 960,600 font "sans,11"
set output "$2"
set title "$3"
set datafile separator ","
set logscale x 2
set xtics ("8" 8, "128" 128, "2K" 2048, "32K" 32768, "512K" 524288, "8M" 8388608, "128M" 134217728)
set mxtics default
set xlabel "message size (bytes, per rank)"
set ylabel "bus bandwidth (GB/s)"
set key top left
set grid
plot "$1" every ::1 using 2:10 with linespoints lw 2 pt 7 ps 0.6 title "$4", \
     "$1" every ::1 using 2:18 with linespoints lw 2 pt 5 ps 0.6 title "$5"
GNUPLOT
}

for n in $RANKS; do
  extra=()
  [ "$n" -gt "$cores" ] && extra+=(--oversubscribe)
  for transport in $TRANSPORTS; do
    name=allreduce-n$n-$transport
    # shellcheck disable=SC2207
    mpi_args=($(mpi_args_for "$transport"))
    run=("${MPIRUN[@]}" "${extra[@]}" -np "$n" "${mpi_args[@]}" -x RINGLET_TRANSPORT="$transport"
         -x RINGLET_TIMEOUT=120 "$BENCH")
    # Probe: is this transport built? (a tiny run; its error says why not)
    if ! probe=$("${run[@]}" -b 8 -e 8 -n 1 -w 0 2>&1); then
      say "skipping $name: ringlet's $transport transport did not run:"
      echo "$probe" | grep -m3 "ringlet" >&2 || echo "$probe" | tail -3 >&2
      continue
    fi
    say "running $name ($MINBYTES..$MAXBYTES, $ITERS iterations)"
    "${run[@]}" -b "$MINBYTES" -e "$MAXBYTES" -n "$ITERS" -w "$WARMUP" --vs-mpi \
      --json "$OUT/$name.json" --csv "$OUT/$name.csv" | tee "$OUT/$name.txt"
    plot "$OUT/$name.csv" "$OUT/$name.png" \
      "float32 sum all-reduce, $n ranks, one host ($cores cores)" \
      "ringlet ($transport)" "$(mpi_label_for "$transport")"
    say "wrote $OUT/$name.{txt,json,csv,png}"
  done
done
