#!/usr/bin/env bash
# Checks that the sources match what the project says of them:
#   format  every C++/CUDA file is clang-formatted (.clang-format); exit 77 (skip) without
#           clang-format or outside a git checkout
#   env     every RINGLET_* variable the code reads is in the README's table, and every
#           RINGLET_* in that table is read somewhere
# Usage: scripts/check-source.sh format|env   (run from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."

case ${1:-} in
  format)
    command -v clang-format >/dev/null 2>&1 || { echo "clang-format not installed"; exit 77; }
    git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git checkout"; exit 77; }
    mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu')
    clang-format --dry-run -Werror "${files[@]}"
    echo "clang-format: ${#files[@]} files formatted"
    ;;
  env)
    # Variables the code reads: string literals "RINGLET_..." in the library and the tools.
    code=$(grep -rhoE '"RINGLET_[A-Z0-9_]+"' include src transports collectives kernels bench \
             examples/trainer/src | tr -d '"' | sort -u)
    table=$(grep -oE '^\| `RINGLET_[A-Z0-9_]+`' README.md | grep -oE 'RINGLET_[A-Z0-9_]+' | sort -u)
    missing=$(comm -23 <(echo "$code") <(echo "$table"))
    stale=$(comm -13 <(echo "$code") <(echo "$table"))
    status=0
    if [ -n "$missing" ]; then
      echo "ringlet: read by the code but not in the README's variable table:" $missing
      status=1
    fi
    if [ -n "$stale" ]; then
      echo "ringlet: in the README's variable table but read nowhere:" $stale
      status=1
    fi
    [ $status -eq 0 ] && echo "README lists all $(echo "$code" | wc -l) RINGLET_* variables"
    exit $status
    ;;
  *)
    echo "ringlet: usage: scripts/check-source.sh format|env" >&2
    exit 2
    ;;
esac
