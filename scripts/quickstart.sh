#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job: a 4-rank all-reduce benchmark on this
# host over the default transport, printing the nccl-tests style table.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
echo
echo "$ build/bin/ringlet-run -n 4 build/bin/ringlet-bench -b 8 -e 64M -f 4"
build/bin/ringlet-run -n 4 build/bin/ringlet-bench -b 8 -e 64M -f 4
