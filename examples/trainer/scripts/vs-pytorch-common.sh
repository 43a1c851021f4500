# Sourced by vs-pytorch.sh and vs-pytorch-train.sh: their shared options, the PyTorch check and
# the OpenBLAS kernels both sides use.
#   vs_pytorch_setup NAME "$@"   parses -r ROUNDS -c CORETYPE -j FILE -p into rounds, core, json
#                                and prio (chrt -f 50), and exports OPENBLAS_CORETYPE (default
#                                SkylakeX when the CPU has AVX-512, else Haswell)
vs_pytorch_setup() {
  local name=$1 opt OPTIND=1
  shift
  rounds=3 core="" json="" prio=()
  while getopts "r:c:j:p" opt; do
    case "$opt" in
      r) rounds="$OPTARG" ;;
      c) core="$OPTARG" ;;
      j) json="$OPTARG" ;;
      p) prio=(chrt -f 50) ;;
      *) echo "ringlet: usage: $name [-r ROUNDS] [-c CORETYPE] [-j FILE] [-p]" >&2; exit 2 ;;
    esac
  done
  /usr/bin/python3 -c "import torch" 2>/dev/null ||
    { echo "ringlet: /usr/bin/python3 cannot import torch (scripts/install-deps.sh --torch)" >&2; exit 1; }
  if [ -z "$core" ]; then
    core=Haswell
    grep -q avx512f /proc/cpuinfo && core=SkylakeX
  fi
  export OPENBLAS_CORETYPE="$core"
}
