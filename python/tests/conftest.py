"""Starts ranks as separate processes (python3 workers.py SCENARIO ...) and collects what they say.

Every rank is a fresh /usr/bin/python3 (the interpreter torch is installed for) that imports
ringlet_torch from the build tree (PYTHONPATH set by the ctest entry or RINGLET_PYTHONPATH).
"""
import json
import os
import random
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers.py")


def free_port():
    """A port free now and outside the kernel's ephemeral range, so that no connect() on this
    machine takes it as its local port while the ranks import torch (as ringlet-run picks)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999
    candidates = list(range(20000, max(20000, lo))) + list(range(max(hi + 1, 20000), 65536))
    for port in random.sample(candidates, min(64, len(candidates))):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ranks:
    """The processes of one run: rank r's return code, stdout, stderr and its JSON results."""

    def __init__(self, procs, timeout):
        self.codes, self.out, self.err = [], [], []
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                out, err = p.communicate()
                err += "\n[the test killed this rank: the run passed its deadline]"
            self.codes.append(p.returncode)
            self.out.append(out)
            self.err.append(err)

    def results(self, rank):
        lines = [l for l in self.out[rank].splitlines() if l.startswith("RESULT ")]
        return [json.loads(l[len("RESULT "):]) for l in lines]

    def report(self):
        return "\n".join(
            f"--- rank {r} (exit {c}) ---\n{o}\n{e}"
            for r, (c, o, e) in enumerate(zip(self.codes, self.out, self.err)))

    def expect_success(self):
        assert all(c == 0 for c in self.codes), self.report()
        return self


def spawn_env(rank, n, port, extra=None):
    env = dict(os.environ)
    env.update({
        "RANK": str(rank), "WORLD_SIZE": str(n), "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "OMP_NUM_THREADS": "1",
    })
    if os.environ.get("RINGLET_PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["RINGLET_PYTHONPATH"]
    env.update(extra or {})
    return env


@pytest.fixture
def run_ranks():
    """run_ranks(n, scenario, *args, timeout=120, env=None, ranks_env=None) -> Ranks."""

    def run(n, scenario, *args, timeout=120, env=None, ranks_env=None):
        port = free_port()
        procs = []
        for r in range(n):
            e = spawn_env(r, n, port, env)
            if ranks_env and r in ranks_env:
                e.update(ranks_env[r])
            procs.append(subprocess.Popen(
                [sys.executable, WORKERS, scenario, *map(str, args)], env=e,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        return Ranks(procs, timeout)

    return run
