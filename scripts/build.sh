#!/usr/bin/env bash
# Configures and builds ringlet into build/ (tools land in build/bin/).
# Extra arguments go to the CMake configure step, e.g. scripts/build.sh -DRINGLET_CUDA=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGLET_WERROR=ON "$@" >/dev/null
cmake --build build -j "$(nproc)"
