#!/usr/bin/env python3
"""Soak: many ringlet-run jobs of random collectives, some with a rank SIGKILLed mid-call.

Each job: N = 2..5 ranks, TCP or shared memory (RINGLET_SHM_DIRECT auto, 1 or 0), CALLS random
collectives (operation, count, data type, reduction, root; the v-forms with uneven counts,
sendrecv, two async calls at once) from a seed (build/tests/soak_rank checks every element). In a
fraction of the jobs one rank SIGKILLs itself at a random point of a random call. Every job must
end within its deadline either exact (every rank "ok") or, when a rank was killed, with every
survivor reporting a named error (PeerError, TimeoutError, ...) on its own; and afterwards no
rank may have leaked a file descriptor or thread (soak_rank counts them), no segment may be left
in the job's shared-memory directory, and no rank process may survive.

    scripts/soak.py [--jobs 500] [--calls 20] [--kill-fraction 0.3] [--seed 1] [--build build]

Prints one line per failing job and a table of the figures; exits non-zero on any failure."""
import argparse
import collections
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--calls", type=int, default=20, help="collectives per job")
    parser.add_argument("--kill-fraction", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--build", default="build")
    parser.add_argument("--timeout", type=float, default=20.0, help="RINGLET_TIMEOUT of the ranks")
    args = parser.parse_args()

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = os.path.join(root, args.build)
    run = os.path.join(build, "bin", "ringlet-run")
    rank_program = os.path.join(build, "tests", "soak_rank")
    for path in (run, rank_program):
        if not os.access(path, os.X_OK):
            sys.exit(f"ringlet: {path} is missing (build it: ninja -C {args.build} ringlet-run soak_rank)")

    rng = random.Random(args.seed)
    figures = collections.Counter()
    errors = collections.Counter()
    failures = []
    seconds = []
    detect = []  # wall time of the jobs with a kill
    job_seeds = set()
    examples = {}  # error type -> the first survivor's line with it
    shm_dir = tempfile.mkdtemp(prefix="ringlet-soak-shm-")
    deadline = args.timeout + 15
    for job in range(args.jobs):
        n = rng.randint(2, 5)
        transport = rng.choice(["shm", "tcp"])
        seed = rng.getrandbits(48)
        job_seeds.add(str(seed))
        kill_rank, kill_call = -1, -1
        if rng.random() < args.kill_fraction:
            kill_rank, kill_call = rng.randrange(n), rng.randrange(args.calls)
        # Shared memory's three ways to move a message: the slots, lent messages and direct
        # writes (1), or the host's measured choice (auto).
        direct = rng.choice(["auto", "1", "0"]) if transport == "shm" else "auto"
        env = dict(os.environ, RINGLET_TRANSPORT=transport, RINGLET_SHM_DIR=shm_dir,
                   RINGLET_TIMEOUT=str(args.timeout), RINGLET_SHM_DIRECT=direct)
        cmd = [run, "-n", str(n), "--grace", "2", rank_program, str(seed), str(args.calls),
               str(kill_rank), str(kill_call)]
        start = time.monotonic()
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=deadline)
        except subprocess.TimeoutExpired as e:
            failures.append(f"job {job}: no end within {deadline} s: {' '.join(cmd)}")
            figures["hung"] += 1
            continue
        took = time.monotonic() - start
        seconds.append(took)
        kind = transport if transport == "tcp" else f"shm direct={direct}"
        what = f"job {job} (N={n} {kind} seed={seed} kill={kill_rank}@{kill_call})"
        ranks = {}
        for line in p.stdout.splitlines():
            m = re.match(r"^\[(\d+)\] soak: rank \d+ (.*)$", line)
            if m:
                ranks[int(m.group(1))] = m.group(2)
        problems = []
        for r, text in ranks.items():
            if text.startswith("WRONG"):
                problems.append(f"rank {r} {text}")
                figures["wrong"] += 1
            if "leaked" in text:
                problems.append(f"rank {r} {text}")
                figures["leaks"] += 1
            m = re.match(r"named error (\w+)", text)
            if m:
                errors[m.group(1)] += 1
                examples.setdefault(m.group(1), f"{what}: rank {r} {text}")
        # The killed rank says nothing; the launcher names it (ringlet-run prefers a rank killed
        # by a signal to a survivor that exited first).
        killed = kill_rank >= 0 and p.returncode != 0 and kill_rank not in ranks
        if killed and f"rank {kill_rank} (pid" not in p.stderr:
            problems.append(f"the launcher did not name rank {kill_rank}: {p.stderr.strip()[-300:]}")
            figures["killed rank not named by the launcher"] += 1
        if kill_rank >= 0 and p.returncode == 0:
            figures["kill came after the last call"] += 1
        if killed:
            figures["jobs with a rank killed"] += 1
            detect.append(took)
            survivors = [r for r in range(n) if r != kill_rank]
            for r in survivors:
                text = ranks.get(r)
                if text is None:
                    problems.append(f"rank {r} said nothing (stopped by the launcher before a named error)")
                    figures["survivor without a named error"] += 1
                elif not text.startswith("named error") and not text.startswith("ok"):
                    problems.append(f"rank {r}: {text}")
        elif p.returncode == 0:
            if sorted(ranks) != list(range(n)) or any(not t.startswith("ok") for t in ranks.values()):
                problems.append(f"exit 0 but ranks said {ranks}")
            else:
                figures["exact jobs"] += 1
                figures["collectives checked exact (each on every rank)"] += args.calls + 1
        else:
            problems.append(f"exit {p.returncode} without a kill: {p.stderr.strip()[-400:]}")
        left = os.listdir(shm_dir)
        if left:
            problems.append(f"left in the shm directory: {left}")
            figures["shm files left"] += len(left)
            for name in left:
                os.unlink(os.path.join(shm_dir, name))
        if problems:
            failures.append(what + ": " + "; ".join(problems))
        figures["jobs"] += 1
        figures[f"N={n} {kind}"] += 1

    # No rank process of this soak (its jobs' seeds; another soak may run beside it) may remain.
    stray = []
    for pid in subprocess.run(["pgrep", "-f", rank_program], capture_output=True,
                              text=True).stdout.split():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue  # ended meanwhile
        if len(argv) > 1 and argv[1].decode(errors="replace") in job_seeds:
            stray.append(pid)
    figures["stray rank processes"] = len(stray)
    shutil.rmtree(shm_dir, ignore_errors=True)

    for f in failures:
        print("FAIL", f)
    print(f"\n| figure | value |\n| --- | ---: |")
    for key in sorted(figures):
        print(f"| {key} | {figures[key]} |")
    for key in sorted(errors):
        print(f"| survivor errors: {key} | {errors[key]} |")
    # One example of each kind of error, for the figures' reader (is each the right kind?).
    for key in sorted(examples):
        print(f"example {key}: {examples[key][:400]}")
    if seconds:
        seconds.sort()
        print(f"| job seconds median / max | {seconds[len(seconds) // 2]:.2f} / {seconds[-1]:.2f} |")
    if detect:
        detect.sort()
        print(f"| job seconds with a kill, median / max | {detect[len(detect) // 2]:.2f} / {detect[-1]:.2f} |")
    print(f"| failing jobs | {len(failures)} |")
    return 1 if failures or stray else 0


if __name__ == "__main__":
    sys.exit(main())
