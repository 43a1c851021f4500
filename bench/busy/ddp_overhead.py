"""What gradient synchronization costs a DDP step when compute keeps every core busy.

    /usr/bin/python3 bench/busy/ddp_overhead.py [--repeats 5] [--threads 1,2] [--steps 60]
                                                [--bind auto|none|cores]
                                                [--out bench/results/busy-ddp]

Two ranks on this host (ringlet-run -n 2) train the small BERT (hidden 128, 4 heads, FFN 512,
2 layers, sequence 64, batch 32 per rank, AdamW, classification) with and without gradient
synchronization, alternating, --repeats times:
  - ringlet-train --model bert --task cls, and the same with --no-sync;
  - PyTorch DDP (bench/torch/ddp_bert.py) over gloo and over the ringlet backend, and the same
    under no_sync() (needs the PyTorch backend: build/python).
Threads per rank: 1 is what a user gets by default (ringlet-train: cores / ranks; torchrun sets
OMP_NUM_THREADS=1), so the two ranks' compute fills both cores; 2 makes each rank's BLAS use
every core (oversubscribed). Overhead = step time with sync / step time without - 1, from the
medians; the table also gives min-max of the step times. The machine's speed can move between
runs by more than the overhead (a step without synchronization took 141 ms in one run and 197 in
the next, minutes apart), so each run's forward pass, which communicates nothing, is its own
reference: "per forward" compares step / forward with and without synchronization (the medians
of those ratios over the repeats).

Writes OUT.json and OUT.md.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
PY = "/usr/bin/python3"
RUN = os.path.join(BUILD, "bin", "ringlet-run")


def check(p, cmd):
    if p.returncode != 0:
        sys.exit(f"ringlet: ddp overhead bench: {' '.join(cmd)} failed:\n{p.stdout[-3000:]}")


def trainer_step_ms(threads, steps, no_sync, bind):
    """The median step and forward pass in ms, over the logged windows after the first."""
    cmd = [RUN, "-n", "2", "--bind", bind, os.path.join(BUILD, "bin", "ringlet-train"),
           "--model", "bert", "--task", "cls", "--steps", str(steps), "--log-every", str(steps // 4),
           "--eval-every", str(steps * 10), "--threads", str(threads), "--no-progress",
           "--csv", os.devnull, "--timing"]
    if no_sync:
        cmd.append("--no-sync")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       cwd=tempfile.gettempdir(), timeout=900)
    check(p, cmd)
    windows = [float(x) for x in re.findall(r"samples/s\s+([0-9.]+) ms/step", p.stdout)]
    forwards = [float(x) for x in re.findall(r"ms/step: forward ([0-9.]+)", p.stdout)]
    if len(windows) < 2 or len(forwards) != len(windows):
        sys.exit(f"ringlet: ddp overhead bench: no step times in:\n{p.stdout[-2000:]}")
    # The first window holds the warm-up.
    return statistics.median(windows[1:]), statistics.median(forwards[1:])


def torch_step_ms(backend, threads, steps, no_sync, bind, tmp):
    out = os.path.join(tmp, "ddp.json")
    cmd = [RUN, "-n", "2", "--bind", bind, PY, os.path.join(ROOT, "bench", "torch", "ddp_bert.py"),
           "--backend", backend, "--threads", str(threads), "--steps", str(steps), "--json", out]
    if no_sync:
        cmd.append("--no-sync")
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       timeout=900)
    check(p, cmd)
    result = json.load(open(out))
    return result["step_ms"], result["forward_ms"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--bind", default="auto", choices=["auto", "none", "cores"],
                   help="ringlet-run --bind for every run (default: ringlet-run's own, auto)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "busy-ddp"))
    a = p.parse_args()
    torch_ok = os.path.isdir(os.path.join(BUILD, "python", "ringlet_torch"))
    runs = {}
    forwards = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.repeats):
            for threads in [int(t) for t in a.threads.split(",")]:
                for no_sync in (False, True):
                    tag = "no sync" if no_sync else "sync"
                    key = f"ringlet-train threads={threads} {tag}"
                    step, forward = trainer_step_ms(threads, a.steps, no_sync, a.bind)
                    runs.setdefault(key, []).append(step)
                    forwards.setdefault(key, []).append(forward)
                    print(f"[{rep + 1}/{a.repeats}] {key}: {step:.1f} ms (forward {forward:.1f})",
                          flush=True)
                    if not torch_ok:
                        continue
                    for backend in ("gloo", "ringlet"):
                        key = f"PyTorch DDP {backend} threads={threads} {tag}"
                        step, forward = torch_step_ms(backend, threads, a.steps, no_sync, a.bind, tmp)
                        runs.setdefault(key, []).append(step)
                        forwards.setdefault(key, []).append(forward)
                        print(f"[{rep + 1}/{a.repeats}] {key}: {step:.1f} ms (forward "
                              f"{forward:.1f})", flush=True)
    with open(a.out + ".json", "w") as f:
        json.dump({"cpus": os.cpu_count(), "repeats": a.repeats, "steps": a.steps, "runs": runs,
                   "forward_ms": forwards}, f, indent=1)
    lines = ["# DDP step time with and without gradient synchronization", "",
             f"`bench/busy/ddp_overhead.py` (ringlet-run --bind {a.bind}), {a.repeats} repeats, "
             f"{os.cpu_count()} CPUs, 2 ranks, "
             "small BERT (batch 32 per rank). Step times in ms: median (min-max). Per forward: "
             "the median of step / forward with sync over that without, less 1.", "",
             "| trainer | threads/rank | with sync | no sync | overhead | overhead per forward "
             "| max/median (sync) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, values in runs.items():
        if not key.endswith(" sync") or key.endswith("no sync"):
            continue
        base = key[: -len(" sync")]
        name, threads = base.rsplit(" threads=", 1)
        free = runs[base + " no sync"]
        m, f = statistics.median(values), statistics.median(free)
        per = statistics.median(s / fw for s, fw in zip(values, forwards[key])) / statistics.median(
            s / fw for s, fw in zip(free, forwards[base + " no sync"]))
        lines.append(f"| {name} | {threads} | {m:.1f} ({min(values):.1f}-{max(values):.1f}) | "
                     f"{f:.1f} ({min(free):.1f}-{max(free):.1f}) | {100 * (m / f - 1):+.1f}% | "
                     f"{100 * (per - 1):+.1f}% | {max(values) / m:.2f} |")
    text = "\n".join(lines) + "\n"
    with open(a.out + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
