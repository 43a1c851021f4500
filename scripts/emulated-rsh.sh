#!/bin/sh
# ssh's part for mpirun across emulated hosts (scripts/emulated-hosts.sh): run as Open MPI's
# launch agent from a command on one of those hosts,
#   mpirun --mca plm_rsh_agent scripts/emulated-rsh.sh -H emuhost0:2,emuhost1:2 ... prog
# it starts each remote daemon as ssh would, in host emuhost<i>'s network namespace under its
# hostname. Usage (as mpirun calls it): emulated-rsh.sh emuhost<i> COMMAND...
# Needs EMU_NS_PREFIX (emulated-hosts.sh sets it on every host).
set -eu
host=$1
shift
index=${host#emuhost}
case $index in
  '' | *[!0-9]*)
    echo "emulated-rsh: '$host' is not an emulated host (emuhost<i>)" >&2
    exit 255
    ;;
esac
: "${EMU_NS_PREFIX:?emulated-rsh: EMU_NS_PREFIX is not set (run under scripts/emulated-hosts.sh)}"
# As ssh does, the remote shell reads the words given as one command line, in an environment of
# its own: what the job needs there travels as mpirun -x, as it must between real hosts.
exec env -i PATH="$PATH" HOME="${HOME:-/}" ip netns exec "${EMU_NS_PREFIX}h$index" unshare --uts \
  sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
