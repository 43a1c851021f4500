#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, and runs the whole test suite.
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit, or -LE slow to skip slow tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 -j 2 "$@"
