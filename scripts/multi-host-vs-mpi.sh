#!/usr/bin/env bash
# ringlet against Open MPI across emulated hosts (scripts/emulated-hosts.sh): the real mpirun on
# host 0 launches HOSTS hosts x RANKS ranks, its daemons started by scripts/emulated-rsh.sh in
# place of ssh, and `ringlet-bench --vs-mpi` times every op with ringlet and with Open MPI's
# matching call in the same processes, one after the other at each size, on rate-limited links
# (Open MPI: TCP between hosts, shared memory within one, as it chooses by default). The hosts
# share this machine's cores, so the ranks are left unbound (--bind-to none): each host's daemon
# would bind its first rank to core 0, all of them to the same core. Needs root.
#
#   scripts/multi-host-vs-mpi.sh [BUILD_DIR] [OUT_DIR]
#
# Environment: RATE (tbf rate of every link end, default 1gbit; empty: none), HOSTS (default 2), RANKS (per
# host, default 2), OPS (default all), MIN, MAX, FACTOR (sizes, default 16, 16M, 32), ITERS
# (timed calls, default 10), NAME (default multi-host-vs-mpi). Writes OUT_DIR/NAME.{json,md}
# (default bench/results/): per op and size, each library's time and Open MPI's time over
# ringlet's (> 1: ringlet faster).
set -euo pipefail
build="${1:-$(dirname "$0")/../build}"
out="${2:-$(dirname "$0")/../bench/results}"
source "$(dirname "$0")/multi-host-common.sh"
"$here/install-deps.sh"  # mpirun among the rest
rate="${RATE-1gbit}"
hosts="${HOSTS:-2}"
ranks="${RANKS:-2}"
name="${NAME:-multi-host-vs-mpi}"
export OPS="${OPS:-all}" MIN="${MIN:-16}" MAX="${MAX:-16M}" FACTOR="${FACTOR:-32}"
export ITERS="${ITERS:-10}" RSH="$here/emulated-rsh.sh" OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NAME="$name"
hostlist=""
for ((i = 0; i < hosts; i++)); do hostlist+="${hostlist:+,}emuhost$i:$ranks"; done
export HOSTLIST="$hostlist" NP=$((hosts * ranks))

echo "$OPS, $MIN..$MAX: $hosts hosts x $ranks ranks at $rate, ringlet and Open MPI ..." >&2
"$emulate" --hosts "$hosts" ${rate:+--rate "$rate"} --timeout 900 -- '[ "$EMU_NODE" = 0 ] || exit 0
  mpirun --mca plm_rsh_agent "$RSH" --bind-to none -H "$HOSTLIST" -np "$NP" \
    -x MASTER_ADDR=emuhost0 \
    -x RINGLET_JOB_SECRET "$BIN/ringlet-bench" --ops "$OPS" -b "$MIN" -e "$MAX" -f "$FACTOR" \
    -n "$ITERS" -w 2 --vs-mpi --json "$WORK/$NAME.json" >"$WORK/$NAME.log" 2>&1' ||
  { cat "$work/$name.log" >&2; exit 1; }

/usr/bin/python3 - "$work/$name.json" "$out/$name" "$rate" "$hosts" "$ranks" <<'PY'
import datetime, json, platform, shutil, sys
path, stem, rate, hosts, ranks = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
doc = json.load(open(path))
doc["emulated"] = {"rate": rate, "hosts": int(hosts), "ranks_per_host": int(ranks),
                   "date": datetime.date.today().isoformat(),
                   "machine": platform.processor() or platform.machine()}
for r in doc["results"]:
    if r["out_of_place"]["wrong"] or r.get("mpi", {}).get("wrong"):
        sys.exit(f"{path}: {r['op']} {r['size']} B has wrong elements")
json.dump(doc, open(stem + ".json", "w"), indent=1)
ops = list(dict.fromkeys(r["op"] for r in doc["results"]))
rows = {op: [r for r in doc["results"] if r["op"] == op] for op in ops}
# Columns: the sizes of the ops that have the most (the v-forms' uneven totals and barrier's
# 0 B differ: such a cell names its own size).
sizes = [r["size"] for r in max(rows.values(), key=len)]
def label(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1 << 10 else f"{b} B"
lines = [f"ringlet against Open MPI ({doc['config'].get('mpi_library', '?')}) across emulated "
         f"hosts: {hosts} hosts x {ranks} ranks launched by mpirun, tbf {rate} on every link end, "
         f"float32, {doc['config']['iters']} timed calls a size; made by "
         f"`scripts/multi-host-vs-mpi.sh` on {doc['emulated']['date']}. Each cell: ringlet's "
         f"time / Open MPI's (us) and Open MPI's time over ringlet's (> 1: ringlet faster).", "",
         "| op | " + " | ".join(label(s) for s in sizes) + " |",
         "| --- |" + " --- |" * len(sizes)]
for op in ops:
    cells = []
    for i, s in enumerate(sizes):
        r = rows[op][i] if i < len(rows[op]) else None
        if r is None or "mpi" not in r:
            cells.append("")
            continue
        t, m = r["out_of_place"]["time_us"], r["mpi"]["time_us"]
        own = f"({label(r['size'])}) " if r["size"] != s else ""
        cells.append(f"{own}{t:.0f} / {m:.0f}: {m / t:.2f}" if t > 0 else own)
    lines.append(f"| {op} | " + " | ".join(cells) + " |")
open(stem + ".md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
