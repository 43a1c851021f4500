#!/usr/bin/env bash
# The PyTorch backend against PyTorch 2 (Debian 13's 2.6, CPU), beside the 1.13 that Debian 12
# gives this machine: a Debian 13 root built once with debootstrap, this working tree copied in,
# the extension (its c10d::Backend form), ringlet-run and c10d_store_test built there with that
# root's g++ 14, and the backend's pytest files run there; then c10d_store_test, whose client of
# torchrun's agent store meets 2.6's real TCPStore server (the classic one: see below).
#
#   scripts/torch2-check.sh [pytest args]      e.g. -k all_reduce; default: every test file,
#                                              then c10d_store_test
#
# ROOT (default /srv/ringlet-trixie) is where the Debian 13 root lives; the first run makes it
# (2.7 GiB; about 2 minutes here: debootstrap, then python3-torch, libtorch-dev and the packages
# ringlet builds with), later runs reuse it and copy the tree again (the build there is
# incremental). Needs root (debootstrap, chroot, bind mounts of /proc, /sys and /dev) and
# deb.debian.org. Exit status: pytest's; 2 for a setup that failed, with one "ringlet:" line.
#
# Debian's PyTorch 2.6 is built without libuv, which its TCPStore asks for by default: the run
# sets USE_LIBUV=0 (init_process_group's env:// and the tests' own stores read it). torchrun's
# rendezvous does not, so torchrun cannot start there: the launcher tests that use it are left
# out (test_launchers.py -k "not torchrun"); ringlet-run's are run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${ROOT:-/srv/ringlet-trixie}
mirror=${MIRROR:-http://deb.debian.org/debian}
die() {
  echo "ringlet: torch2-check.sh: $*" >&2
  exit 2
}
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, bind mounts)"

packages=(build-essential cmake ninja-build pkg-config git libgtest-dev libgmock-dev
  libbenchmark-dev libfmt-dev nlohmann-json3-dev libcli11-dev libssl-dev libhwloc-dev
  libopenmpi-dev openmpi-bin libopenblas-dev python3-numpy python3-torch libtorch-dev
  pybind11-dev python3-dev python3-pytest iproute2 procps)
if [ ! -e "$root/.ringlet-ready" ]; then
  if ! command -v debootstrap >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap \
      >/dev/null || die "cannot install debootstrap"
  fi
  echo "ringlet: making a Debian 13 root in $root (once)"
  debootstrap --variant=minbase trixie "$root" "$mirror" >"$root.log" 2>&1 ||
    die "debootstrap failed (log: $root.log)"
  chroot "$root" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install \
    -y -qq --no-install-recommends ${packages[*]}" >>"$root.log" 2>&1 ||
    die "installing PyTorch 2 in $root failed (log: $root.log)"
  touch "$root/.ringlet-ready"
fi
for d in proc sys dev; do
  mountpoint -q "$root/$d" || mount --rbind "/$d" "$root/$d" || die "cannot bind /$d into $root"
done

# The working tree as it is (tracked files, uncommitted changes included), over the last copy.
src=$root/work/ringlet
mkdir -p "$src"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$src"

chroot "$root" bash -c "cd /work/ringlet && cmake -S . -B build -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGLET_TORCH=ON -DRINGLET_CUDA=OFF \
  -DRINGLET_BUILD_TESTS=ON -DRINGLET_BUILD_BENCH=OFF -DRINGLET_BUILD_EXAMPLES=OFF &&
  ninja -C build -j$(nproc) ringlet_torch_ext ringlet-run c10d_store_test" >"$src/build.log" 2>&1 ||
  die "the build in $root failed (log: $src/build.log)"
version=$(chroot "$root" python3 -c "import torch; print(torch.__version__)")
echo "ringlet: PyTorch $version in $root"

args=("$@")
store_test=0
if [ ${#args[@]} -eq 0 ]; then
  args=(test_ops.py test_failure.py test_ddp.py test_launchers.py -k "not torchrun")
  store_test=1
fi
quoted=$(printf '%q ' "${args[@]}")
status=0
chroot "$root" bash -c "cd /work/ringlet/python/tests && USE_LIBUV=0 \
  RINGLET_PYTHONPATH=/work/ringlet/build/python RINGLET_BUILD_BIN=/work/ringlet/build/bin \
  PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider $quoted" || status=$?
if [ "$store_test" -eq 1 ]; then
  # The test starts its own server (the classic one where torch has no libuv) and says which.
  chroot "$root" bash -c "cd /work/ringlet/build && timeout 600 ./tests/c10d_store_test \
    --gtest_brief=1" || status=$((status ? status : 1))
fi
exit "$status"
