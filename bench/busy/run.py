"""All-reduce on busy cores: ringlet against Open MPI and Gloo under the same load, repeated.

    /usr/bin/python3 bench/busy/run.py [--repeats 5] [--ranks 2,4] [--transports shm,tcp]
                                        [--waits adaptive,fixed] [--no-gloo] [--loads busy,idle]
                                        [--binds auto,none]
                                        [--ops allreduce,...] [--sizes 8,64M]
                                        [--out bench/results/busy-cores]

Every measurement runs under scripts/with-cpu-hogs.sh (one busy loop per core, started before
the run and stopped after it), and the configurations alternate within each repeat, so slow
phases of a shared machine hit them all alike:
  - ringlet-bench --vs-mpi under mpirun: ringlet and MPI_Allreduce in the same processes on the
    same buffers, float32 sum, 8 B and 64 KiB..64 MiB, each size timed for --min-time-ms; shm
    against Open MPI's shared memory (vader), tcp against its TCP BTL on loopback; once per wait
    policy (RINGLET_WAIT);
  - bench/torch/allreduce_vs_gloo.py under ringlet-run: torch.distributed.all_reduce through
    the ringlet backend and through gloo in the same processes (needs the PyTorch backend);
    once per --binds mode of ringlet-run (default: auto, its own default, which pins ranks that
    fit the cores; none leaves them to the scheduler, as torchrun does; cores: one core each).
With --loads idle (or busy,idle) the runs are made without the load (the regression check).
--ops runs other collectives beside their Open MPI calls (ringlet-bench --ops; Gloo's run is
all-reduce only), --sizes only the sizes named (default: 8 B and 64 KiB..64 MiB by 4x).

Writes OUT.json (every run) and OUT.md: per configuration and size the median busbw (time at
8 B) with min and max over the repeats, the ratios of the medians, and max/median.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HOGS = os.path.join(ROOT, "scripts", "with-cpu-hogs.sh")
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
PY = "/usr/bin/python3"
RANGES = [("8", "8", "2"), ("64K", "64M", "4")]
OPS = ["allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather",
       "scatter", "barrier", "sendrecv"]


def run(cmd, env=None, load=True, timeout=900):
    full = ([HOGS] if load else []) + cmd
    t0 = time.time()
    p = subprocess.run(full, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"ringlet: busy-cores bench: {' '.join(cmd)} failed:\n{p.stdout[-3000:]}")
    return p.stdout, time.time() - t0


def mpi_run(n, transport, wait, load, min_ms, tmp, ops="allreduce", ranges=RANGES):
    rows = []
    for lo, hi, f in ranges:
        out = os.path.join(tmp, "r.json")
        cmd = ["mpirun", "--allow-run-as-root", "-np", str(n)]
        if n > os.cpu_count():
            cmd.append("--oversubscribe")
        if transport == "tcp":
            cmd += ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"]
        cmd += ["-x", f"RINGLET_WAIT={wait}", "-x", f"RINGLET_TRANSPORT={transport}",
                "-x", "RINGLET_TIMEOUT=300", "-x", "RINGLET_DEBUG=NONE",
                os.path.join(BUILD, "bin", "ringlet-bench"), "--ops", ops, "-b", lo,
                "-e", hi, "-f", f, "-n", "auto", "--min-time-ms", str(min_ms), "-w", "1",
                "--warmup-ms", "50", "--vs-mpi", "--json", out]
        run(cmd, load=load)
        for r in json.load(open(out))["results"]:
            rows.append({"op": r["op"], "bytes": r["size"],
                         "ringlet_us": r["out_of_place"]["time_us"],
                         "ringlet_busbw": r["out_of_place"]["busbw_gbs"],
                         "ref_us": r["mpi"]["time_us"], "ref_busbw": r["mpi"]["busbw_gbs"]})
    return rows


def gloo_run(n, transport, load, bind, tmp):
    """bind: ringlet-run's --bind mode."""
    out = os.path.join(tmp, "g.json")
    env = dict(os.environ, RINGLET_TRANSPORT=transport, RINGLET_DEBUG="NONE",
               PYTHONPATH=os.path.join(BUILD, "python"))
    rows = []
    for lo, hi in (("8", "8"), ("64K", "64M")):
        run([os.path.join(BUILD, "bin", "ringlet-run"), "-n", str(n), "--bind", bind] + [PY,
             os.path.join(ROOT, "bench", "torch", "allreduce_vs_gloo.py"), "--min-bytes", lo,
             "--max-bytes", hi, "--batches", "3", "--batch-ms", "60", "--json", out],
            env=env, load=load)
        for r in json.load(open(out))["rows"]:
            if r["bytes"] != 8 and (r["bytes"] & (r["bytes"] - 1) or r["bytes"].bit_length() % 2 == 0):
                continue  # keep the powers of 4 (64K, 256K, ...) like the MPI runs
            rows.append({"bytes": r["bytes"], "ringlet_us": r["ringlet"]["seconds"] * 1e6,
                         "ringlet_busbw": r["ringlet"]["busbw_gbs"],
                         "ref_us": r["gloo"]["seconds"] * 1e6,
                         "ref_busbw": r["gloo"]["busbw_gbs"]})
    return rows


def summarize(runs):
    """runs: {config: [rows of one repeat]} -> markdown."""
    lines = []
    for config, repeats in runs.items():
        ref = "Gloo" if config.startswith("gloo") else "Open MPI"
        lines += [f"### {config}", "",
                  f"| size | ringlet median (min-max) | {ref} median (min-max) | ratio of medians "
                  f"| ringlet max/median |", "| --- | --- | --- | --- | --- |"]
        points = sorted({(r.get("op", "allreduce"), r["bytes"]) for rows in repeats for r in rows},
                        key=lambda p: (OPS.index(p[0]) if p[0] in OPS else len(OPS), p[0], p[1]))
        several = len({op for op, _ in points}) > 1
        for op, size in points:
            rs = [r for rows in repeats for r in rows
                  if r["bytes"] == size and r.get("op", "allreduce") == op]
            what = f"{op} " if several else ""
            if size < 64 << 10:  # latency: time, lower is better
                mine = [r["ringlet_us"] for r in rs]
                ref_v = [r["ref_us"] for r in rs]
                m, f = statistics.median(mine), statistics.median(ref_v)
                lines.append(
                    f"| {what}{size} B | {m:.2f} us ({min(mine):.2f}-{max(mine):.2f}) | {f:.2f} us "
                    f"({min(ref_v):.2f}-{max(ref_v):.2f}) | time {m / f:.2f}x | "
                    f"{max(mine) / m:.2f} |")
            else:
                mine = [r["ringlet_busbw"] for r in rs]
                ref_v = [r["ref_busbw"] for r in rs]
                times = [r["ringlet_us"] for r in rs]
                m, f = statistics.median(mine), statistics.median(ref_v)
                label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
                lines.append(
                    f"| {what}{label} | {m:.2f} GB/s ({min(mine):.2f}-{max(mine):.2f}) | {f:.2f} GB/s "
                    f"({min(ref_v):.2f}-{max(ref_v):.2f}) | busbw {m / f:.2f}x | "
                    f"{max(times) / statistics.median(times):.2f} |")
        lines.append("")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--transports", default="shm,tcp")
    p.add_argument("--waits", default="adaptive,fixed")
    p.add_argument("--min-time-ms", type=int, default=200)
    p.add_argument("--no-gloo", action="store_true")
    p.add_argument("--loads", default="busy", help="busy, idle, or busy,idle")
    p.add_argument("--binds", default="auto",
                   help="ringlet-run --bind modes of the Gloo comparison: auto, none, cores")
    p.add_argument("--ops", default="allreduce",
                   help="collectives beside their Open MPI calls (ringlet-bench --ops)")
    p.add_argument("--sizes", default="",
                   help="only these sizes (8,64M): default 8 B and 64 KiB..64 MiB by 4x")
    p.add_argument("--from-json", default="",
                   help="only rewrite OUT.md from a JSON this script wrote (no runs)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "busy-cores"))
    a = p.parse_args()
    ranks = [int(x) for x in a.ranks.split(",")]
    ranges = [(x, x, "2") for x in a.sizes.split(",")] if a.sizes else RANGES
    for op in a.ops.split(","):
        if op not in OPS:
            sys.exit(f"ringlet: busy-cores bench: --ops: unknown collective {op!r} "
                     f"(one of {','.join(OPS)})")
    for bind in a.binds.split(","):
        if bind not in ("auto", "none", "cores"):
            sys.exit(f"ringlet: busy-cores bench: --binds takes auto, none, cores, not {bind!r}")
    transports = a.transports.split(",")
    waits = a.waits.split(",")
    gloo = not a.no_gloo and os.path.isdir(os.path.join(BUILD, "python", "ringlet_torch"))
    loads = []
    for load in a.loads.split(","):
        if load not in ("busy", "idle"):
            sys.exit(f"ringlet: busy-cores bench: --loads takes busy and/or idle, not {load!r}")
        loads.append(load == "busy")
    runs = {}
    if a.from_json:
        saved = json.load(open(a.from_json))
        a.repeats, runs = saved["repeats"], saved["runs"]
        a.loads = ""
        loads = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.repeats):
            for load in loads:
                tag = "busy" if load else "idle"
                for n in ranks:
                    for t in transports:
                        for w in waits:
                            key = f"mpi {tag} n{n} {t} wait={w}"
                            t0 = time.time()
                            runs.setdefault(key, []).append(
                                mpi_run(n, t, w, load, a.min_time_ms, tmp, a.ops, ranges))
                            print(f"[{rep + 1}/{a.repeats}] {key}: {time.time() - t0:.0f} s",
                                  flush=True)
                        for bind in a.binds.split(",") if gloo else []:
                            key = f"gloo {tag} n{n} {t} bind={bind}"
                            t0 = time.time()
                            runs.setdefault(key, []).append(gloo_run(n, t, load, bind, tmp))
                            print(f"[{rep + 1}/{a.repeats}] {key}: {time.time() - t0:.0f} s",
                                  flush=True)
    if not a.from_json:
        with open(a.out + ".json", "w") as f:
            json.dump({"cpus": os.cpu_count(), "repeats": a.repeats, "runs": runs,
                       "command": " ".join(sys.argv[1:])}, f, indent=1)
    command = json.load(open(a.from_json)).get("command", "") if a.from_json else \
        " ".join(sys.argv[1:])
    title = "All-reduce" if a.ops == "allreduce" else "Collectives"
    text = (f"# {title} on busy cores\n\n"
            f"`bench/busy/run.py {command}`, {a.repeats} repeats, "
            f"{os.cpu_count()} CPUs, float32 sum; "
            "one busy loop per core (scripts/with-cpu-hogs.sh) in the 'busy' runs. Ratio: "
            "ringlet's median over the reference's (busbw: > 1 is ringlet faster; time at 8 B: "
            "< 1 is ringlet faster).\n\n" + summarize(runs))
    with open(a.out + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
