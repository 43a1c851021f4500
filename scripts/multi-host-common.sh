# Sourced by the emulated-host benchmarks (multi-host-bench.sh, multi-host-ops.sh,
# multi-stream-bench.sh): where things are, a scratch folder removed on exit, a job secret, and
# the link's reference rate measured with Python sockets.
#
#   source "$(dirname "$0")/multi-host-common.sh"    (after reading BUILD_DIR OUT_DIR into
#                                                     build and out)
# Sets here, emulate, work (exported as WORK), BIN; exports RINGLET_JOB_SECRET; defines
# python_streams.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
emulate="$here/emulated-hosts.sh"
work="$(mktemp -d /tmp/ringlet-emulated-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
RINGLET_JOB_SECRET="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
export RINGLET_JOB_SECRET
mkdir -p "$out"
build="$(cd "$build" && pwd)"  # absolute: the hosts' commands may run elsewhere
out="$(cd "$out" && pwd)"
export BIN="$build/bin" WORK="$work"

# K Python TCP streams from host 0 to host 1 at once, 480 MiB over all of them: prints GB/s,
# timed over the second half of the bytes (past a policer's burst and TCP's ramp).
#   python_streams NAME FLOWS [emulated-hosts.sh options...]
python_streams() {
  local name="$1" flows="$2"
  shift 2
  FLOWS="$flows" NAME="$name" "$emulate" --hosts 2 "$@" --timeout 120 -- '/usr/bin/python3 -c "
import os, socket, sys, time, selectors
node, flows = int(os.environ[\"EMU_NODE\"]), int(os.environ[\"FLOWS\"])
each = (480 << 20) // flows
if node == 1:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((\"10.231.0.2\", 29611)); s.listen(flows)
    conns = [s.accept()[0] for _ in range(flows)]
    sel = selectors.DefaultSelector(); left = {}
    for c in conns: c.setblocking(False); sel.register(c, selectors.EVENT_READ); left[c] = each
    buf = bytearray(1 << 20); got = 0; half = None
    while left:
        for key, _ in sel.select():
            c = key.fileobj
            try: n = c.recv_into(buf, min(len(buf), left[c]))
            except BlockingIOError: continue
            if n == 0: sys.exit(\"stream ended early\")
            got += n
            if half is None and 2 * got >= flows * each: half = (time.perf_counter(), got)
            left[c] -= n
            if left[c] == 0: sel.unregister(c); del left[c]
    took = time.perf_counter() - half[0]
    open(os.environ[\"WORK\"] + \"/\" + os.environ[\"NAME\"] + \".txt\", \"w\").write(\"%.4f\" % ((got - half[1]) / took / 1e9))
else:
    for attempt in range(100):
        try:
            conns = [socket.create_connection((\"10.231.0.2\", 29611)) for _ in range(flows)]; break
        except OSError: time.sleep(0.05)
    sel = selectors.DefaultSelector(); left = {}; chunk = memoryview(b\"x\" * (1 << 20))
    for c in conns: c.setblocking(False); sel.register(c, selectors.EVENT_WRITE); left[c] = each
    while left:
        for key, _ in sel.select():
            c = key.fileobj
            try: n = c.send(chunk[:min(len(chunk), left[c])])
            except BlockingIOError: continue
            left[c] -= n
            if left[c] == 0: sel.unregister(c); del left[c]
    for c in conns: c.close()
"' >&2
  cat "$work/$name.txt"
}
