#!/usr/bin/env bash
# Installs a built ringlet tree into a fresh prefix and uses it from examples/downstream, as
# another project would: through find_package(ringlet) and through pkg-config. Both programs
# then run a 2-rank all-reduce under the installed ringlet-run.
#
#   tests/install/downstream.sh <build dir> <source dir> <soname> [cmake] [c++ compiler]
set -euo pipefail

build=$1
source=$2
soname=$3
cmake=${4:-cmake}
cxx=${5:-c++}

fail() {
  echo "ringlet: install test: $*" >&2
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/ringlet-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
# Nothing from the build tree or the environment may help the installed files to be found.
unset LD_LIBRARY_PATH CMAKE_PREFIX_PATH PKG_CONFIG_PATH ringlet_DIR

echo "== cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; fail "cmake --install failed"; }

# The layout, found rather than assumed (GNUInstallDirs may pick lib64 or a multiarch libdir).
pc=$(find "$prefix" -path '*/pkgconfig/ringlet.pc' | head -n 1)
config=$(find "$prefix" -name ringletConfig.cmake | head -n 1)
[[ -n $pc ]] || fail "no ringlet.pc under $prefix"
[[ -n $config ]] || fail "no ringletConfig.cmake under $prefix"
libdir=$(dirname "$(dirname "$pc")")
for file in include/ringlet/ringlet.h include/ringlet/communicator.h bin/ringlet-run \
  bin/ringlet-info "${libdir#"$prefix"/}/$soname" "${libdir#"$prefix"/}/libringlet.so"; do
  [[ -e $prefix/$file ]] || fail "$file is not installed"
done
[[ -f $(dirname "$config")/ringletConfigVersion.cmake ]] || fail "no ringletConfigVersion.cmake"

# Installed files must not point back into the build or source tree.
if grep -rlF -e "$build" -e "$source" "$(dirname "$config")" "$pc"; then
  fail "installed CMake or pkg-config files name the build or source tree (files above)"
fi
readelf -d "$libdir/libringlet.so" | grep -q "Library soname: \[$soname\]" ||
  fail "libringlet.so has no SONAME $soname"
for tool in "$prefix"/bin/*; do
  if readelf -d "$tool" | grep -E 'R(UN)?PATH' | grep -qF -e "$build" -e "$source"; then
    fail "$tool keeps a run path into the build tree"
  fi
done
"$prefix/bin/ringlet-info" >"$work/info.log" 2>&1 ||
  { cat "$work/info.log" >&2; fail "installed ringlet-info does not run"; }

# The PyTorch backend, when it was built: it imports from the installed tree alone.
pkg=$(find "$prefix" -type d -name ringlet_torch | head -n 1)
if [[ -n $pkg ]]; then
  echo "== import ringlet_torch from $pkg"
  if readelf -d "$pkg"/_C*.so | grep -E 'R(UN)?PATH' | grep -qF -e "$build" -e "$source"; then
    fail "ringlet_torch keeps a run path into the build tree"
  fi
  PYTHONPATH=$(dirname "$pkg") /usr/bin/python3 -c \
    "import ringlet_torch, torch.distributed as d; assert 'RINGLET' in d.Backend._plugins; print('ringlet_torch', ringlet_torch.version())" ||
    fail "the installed ringlet_torch does not import"
fi

check_run() {  # <name> <program>: runs it on 2 ranks with the installed launcher
  local name=$1 program=$2 out
  echo "== $name: ringlet-run -n 2 $program"
  if ! out=$("$prefix/bin/ringlet-run" -n 2 "$program" 2>&1); then
    echo "$out" >&2
    fail "$name: the 2-rank run failed"
  fi
  echo "$out"
  grep -q "over 2 ranks ok" <<<"$out" || fail "$name: no success line from rank 0"
}

echo "== find_package(ringlet) with CMAKE_PREFIX_PATH=$prefix"
"$cmake" -S "$source/examples/downstream" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log" >&2; fail "configuring examples/downstream failed"; }
found=$(sed -n 's/^ringlet_DIR:PATH=//p' "$work/cmake-build/CMakeCache.txt")
[[ $found == "$prefix"/* ]] || fail "find_package found ringlet in '$found', not in $prefix"
"$cmake" --build "$work/cmake-build" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log" >&2; fail "building examples/downstream with CMake failed"; }
check_run find_package "$work/cmake-build/ringlet-downstream"

echo "== pkg-config with PKG_CONFIG_PATH=$libdir/pkgconfig"
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs ringlet) || fail "pkg-config does not find ringlet.pc"
echo "pkg-config --cflags --libs ringlet: $flags"
[[ $(pkg-config --modversion ringlet) == "$(sed -n 's/^Version: //p' "$pc")" ]] ||
  fail "pkg-config --modversion disagrees with ringlet.pc"
mkdir "$work/pc-build"
make -s -C "$work/pc-build" -f "$source/examples/downstream/Makefile" CXX="$cxx" \
  >"$work/make.log" 2>&1 || { cat "$work/make.log" >&2; fail "building with pkg-config failed"; }
check_run pkg-config "$work/pc-build/ringlet-downstream"

echo "install test: ok"
