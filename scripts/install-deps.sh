#!/usr/bin/env bash
# Installs the Debian packages ringlet needs to build, test and benchmark. Does nothing when all
# of them are present; otherwise runs apt-get update and installs the missing ones.
#   --torch (or RINGLET_WITH_TORCH=1)  also PyTorch (CPU), its C++ headers, pybind11 and pytest,
#                                      for the PyTorch backend (python/ringlet_torch) and its tests
#   --fuzz                             also clang 14 and libFuzzer, for scripts/fuzz.sh and
#                                      scripts/sanitize.sh
#   --plots                            also matplotlib, for the benchmark scripts' PNGs
set -euo pipefail

with_torch="${RINGLET_WITH_TORCH:-0}"
with_fuzz=0
with_plots=0
for arg in "$@"; do
  case "$arg" in
    --torch) with_torch=1 ;;
    --fuzz) with_fuzz=1 ;;
    --plots) with_plots=1 ;;
    *) echo "ringlet: install-deps.sh: unknown option '$arg' (known: --torch, --fuzz, --plots)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config git clang-format
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev libssl-dev
  libhwloc-dev libopenmpi-dev openmpi-bin
  libopenblas-dev gnuplot-nox iproute2
  python3-numpy python3-scipy
)
if [ "$with_torch" = "1" ]; then
  packages+=(python3-torch libtorch-dev pybind11-dev python3-dev python3-pytest)
fi
if [ "$with_fuzz" = "1" ]; then
  packages+=(clang-14 libfuzzer-14-dev)
fi
if [ "$with_plots" = "1" ]; then
  packages+=(python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "ringlet: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
