#!/usr/bin/env bash
# Emulated hosts: M network namespaces on one bridge, each with its own hostname, running a
# command as every host at once. Needs root (ip netns).
#
#   scripts/emulated-hosts.sh [--hosts M] [--rate RATE] [--flow-rate RATE] [--timeout S]
#                             [--control CMD] -- CMD
#
# Host i (0..M-1) is namespace <prefix>h<i> with interface eth0 at 10.231.0.<i+1>/24 and hostname
# emuhost<i> (every host resolves every emuhost<j>: /etc/netns/<prefix>h<i>/hosts); the hosts meet on a bridge inside a namespace of its own (<prefix>sw, port p<i> for
# host i), so nothing is added to the machine's own network and two runs never collide. CMD is a
# shell command run by `sh -c` on every host at once, with EMU_NODE (i), EMU_HOSTS (M),
# EMU_ADDR (its address), EMU_MASTER_ADDR (host 0's) and EMU_NS_PREFIX in its environment. For
# mpirun across these hosts, run it on host 0 with scripts/emulated-rsh.sh as its launch agent.
#
#   --rate RATE    limit both ends of every link with tbf (e.g. 1gbit; burst 256kb, latency 20ms)
#   --flow-rate RATE  also police every TCP flow a host sends to RATE (e.g. 250mbit): packets over
#                  it are dropped, as clouds limit one flow (iptables hashlimit per 4-tuple, burst
#                  one second of RATE; needs the iptables command: apt-get install iptables)
#   --timeout S    stop everything after S seconds (default 120): SIGTERM, then SIGKILL 5 s later
#   --control CMD  also run CMD in the machine's own namespace (e.g. to cut a link:
#                  `ip netns exec "$EMU_SWITCH_NS" ip link set p1 down`), with EMU_SWITCH_NS,
#                  EMU_NS_PREFIX and EMU_HOSTS set; its status is not the result
#
# Exit status: 0 when CMD succeeded on every host, else the status of the first host (lowest i)
# that failed; each failure is named on stderr. 77 when namespaces cannot be made here (not
# root, no `ip netns`). Everything made is removed on exit, on failure and on SIGINT/SIGTERM.
set -u

hosts=2
rate=""
flow_rate=""
timeout_s=120
control=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --flow-rate) flow_rate="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --control) control="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "emulated-hosts: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $# -eq 0 ]]; then echo "emulated-hosts: no command given (see --help)" >&2; exit 2; fi
if ! [[ "$hosts" =~ ^[0-9]+$ ]] || (( hosts < 1 || hosts > 200 )); then
  echo "emulated-hosts: --hosts $hosts is not between 1 and 200" >&2; exit 2
fi
command_text="$*"
flow_kbytes=""
if [[ -n "$flow_rate" ]]; then
  # RATE in tc's bit units -> iptables' KiB/s.
  if ! [[ "$flow_rate" =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]]; then
    echo "emulated-hosts: --flow-rate $flow_rate is not a number with bit, kbit, mbit or gbit" >&2
    exit 2
  fi
  case "${BASH_REMATCH[2]}" in
    bit) scale=1 ;; kbit) scale=1000 ;; mbit) scale=1000000 ;; gbit) scale=1000000000 ;;
  esac
  flow_kbytes=$(( BASH_REMATCH[1] * scale / 8 / 1024 ))
  (( flow_kbytes >= 1 )) || { echo "emulated-hosts: --flow-rate $flow_rate is too low" >&2; exit 2; }
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "emulated-hosts: skipped: network namespaces need root (uid $(id -u))" >&2; exit 77
fi
if [[ -n "$flow_rate" ]] && ! command -v iptables >/dev/null; then
  echo "emulated-hosts: skipped: --flow-rate needs iptables (apt-get install iptables)" >&2; exit 77
fi
prefix="rl$$x"
switch_ns="${prefix}sw"
made=()
pids=()

cleanup() {
  local pid ns
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null
  done
  for ns in "${made[@]}"; do
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! ip netns add "$switch_ns" 2>/tmp/emulated-hosts.$$.err; then
  echo "emulated-hosts: skipped: 'ip netns add' failed: $(cat /tmp/emulated-hosts.$$.err)" >&2
  rm -f /tmp/emulated-hosts.$$.err
  exit 77
fi
rm -f /tmp/emulated-hosts.$$.err
made+=("$switch_ns")

fail() { echo "emulated-hosts: $*" >&2; exit 1; }
limit() {  # namespace, device
  [[ -z "$rate" ]] && return 0
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$rate" burst 256kb latency 20ms ||
    fail "tc tbf rate $rate on $2 in $1 failed"
}

ip -n "$switch_ns" link add br0 type bridge || fail "cannot make the bridge"
ip -n "$switch_ns" link set br0 up || fail "cannot bring the bridge up"
for ((i = 0; i < hosts; i++)); do
  ns="${prefix}h$i"
  ip netns add "$ns" || fail "ip netns add $ns failed"
  made+=("$ns")
  ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$switch_ns" ||
    fail "cannot make the link of host $i"
  ip -n "$switch_ns" link set "p$i" master br0 up || fail "cannot attach host $i to the bridge"
  ip -n "$ns" addr add "10.231.0.$((i + 1))/24" dev eth0 || fail "cannot address host $i"
  ip -n "$ns" link set eth0 up || fail "cannot bring up host $i's link"
  ip -n "$ns" link set lo up || fail "cannot bring up host $i's loopback"
  limit "$ns" eth0
  limit "$switch_ns" "p$i"
  if [[ -n "$flow_kbytes" ]]; then
    ip netns exec "$ns" iptables -A OUTPUT -o eth0 -p tcp -m hashlimit --hashlimit-name flows \
      --hashlimit-mode srcip,srcport,dstip,dstport --hashlimit-above "${flow_kbytes}kb/s" \
      --hashlimit-burst "$((flow_kbytes + 1))kb" -j DROP ||
      fail "iptables hashlimit $flow_rate per flow in $ns failed"
  fi
done

# Every host resolves every host's name (`ip netns exec` mounts /etc/netns/NS/hosts over
# /etc/hosts), as on a cluster whose hosts know each other by name.
for ((i = 0; i < hosts; i++)); do
  mkdir -p "/etc/netns/${prefix}h$i" || fail "cannot make /etc/netns/${prefix}h$i"
  {
    echo "127.0.0.1 localhost"
    for ((j = 0; j < hosts; j++)); do echo "10.231.0.$((j + 1)) emuhost$j"; done
  } >"/etc/netns/${prefix}h$i/hosts"
done

for ((i = 0; i < hosts; i++)); do
  # setsid: each host's command leads a process group that cleanup() can stop as a whole.
  EMU_NODE=$i EMU_HOSTS=$hosts EMU_ADDR="10.231.0.$((i + 1))" EMU_MASTER_ADDR=10.231.0.1 \
    EMU_COMMAND="$command_text" EMU_HOSTNAME="emuhost$i" EMU_NS_PREFIX="$prefix" \
    setsid timeout -k 5 "$timeout_s" ip netns exec "${prefix}h$i" unshare --uts \
    sh -c 'hostname "$EMU_HOSTNAME" && exec sh -c "$EMU_COMMAND"' &
  pids+=($!)
done
control_pid=""
if [[ -n "$control" ]]; then
  EMU_SWITCH_NS="$switch_ns" EMU_NS_PREFIX="$prefix" EMU_HOSTS=$hosts \
    setsid timeout -k 5 "$timeout_s" sh -c "$control" &
  control_pid=$!
  pids+=("$control_pid")
fi

result=0
for ((i = 0; i < hosts; i++)); do
  wait "${pids[$i]}"
  status=$?
  if (( status != 0 )); then
    what="exited with status $status"
    (( status == 124 )) && what="timed out after $timeout_s s (--timeout)"
    echo "emulated-hosts: host $i $what" >&2
    (( result == 0 )) && result=$status
  fi
done
[[ -n "$control_pid" ]] && wait "$control_pid"
exit "$result"
