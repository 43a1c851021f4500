"""The backend under the real launchers: torchrun and ringlet-run."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import WORKERS, free_port

BUILD_BIN = os.environ.get("RINGLET_BUILD_BIN", "")


def env():
    e = dict(os.environ)
    if e.get("RINGLET_PYTHONPATH"):
        e["PYTHONPATH"] = e["RINGLET_PYTHONPATH"]
    e["OMP_NUM_THREADS"] = "1"
    return e


def results(out):
    # Each worker prints "RESULT {json}" lines; torchrun's --tee prefixes every line with its
    # worker ("[default0]:") and, when two workers' writes meet, has glued the next prefix onto
    # the end of a result line: read the JSON object that follows each "RESULT ", wherever it
    # is, and ignore what comes after it.
    import json
    decoder = json.JSONDecoder()
    return [decoder.raw_decode(part)[0] for part in out.split("RESULT ")[1:]]


def check_hello(out, n):
    res = results(out)
    assert sorted(r["rank"] for r in res) == list(range(n)), out
    for r in res:
        assert r["n"] == n and r["sum"] == n * (n + 1) / 2, r
        assert "shm" in r["links"], r  # one host: shared memory between every pair


def test_torchrun():
    torchrun = shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun is not installed (apt-get install python3-torch)")
    # Debian's torchrun 1.13 on Python 3.11 crashes with its default --redirects/--tee of "0".
    cmd = [sys.executable, torchrun, "--nproc_per_node=2", "--redirects", "1", "--tee", "1",
           "--master_port", str(free_port()), WORKERS, "hello"]
    p = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    check_hello(p.stdout, 2)


def test_torchrun_restarts_every_rank_after_one_dies():
    torchrun = shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun is not installed (apt-get install python3-torch)")
    cmd = [sys.executable, torchrun, "--nproc_per_node=3", "--redirects", "1", "--tee", "1",
           "--max_restarts", "1", "--monitor_interval", "5", "--master_port", str(free_port()),
           WORKERS, "restart"]
    p = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=240)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    res = results(p.stdout)
    done = [r for r in res if "links" in r]
    assert sorted(r["rank"] for r in done) == [0, 1, 2], out
    assert all(r["attempt"] == 1 and r["n"] == 3 for r in done), done
    # The first attempt did run and fail: its survivors were told which rank died (within
    # milliseconds; torchrun looks every --monitor_interval and then stops them, so a survivor not
    # on a core between the death and torchrun's next look may not have printed it. At 2 s that
    # look came first once in a full suite run on 2 cores, 2026-11-30: 5 s makes it rarer).
    failed = [r["rank"] for r in res if r.get("attempt") == 0]
    assert failed and set(failed) <= {0, 1}, out
    for r in res:
        if r.get("attempt") == 0:
            assert "rank 2" in r["error"] and "exited" in r["error"], r


def test_ringlet_run():
    run = os.path.join(BUILD_BIN, "ringlet-run") if BUILD_BIN else shutil.which("ringlet-run")
    assert run and os.path.exists(run), "set RINGLET_BUILD_BIN to build/bin"
    p = subprocess.run([run, "-n", "3", sys.executable, WORKERS, "hello"], env=env(),
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    check_hello(p.stdout, 3)


def test_example_ddp_train_learns():
    run = os.path.join(BUILD_BIN, "ringlet-run") if BUILD_BIN else shutil.which("ringlet-run")
    example = os.path.join(os.path.dirname(WORKERS), "..", "..", "examples", "pytorch",
                           "ddp_train.py")
    p = subprocess.run([run, "-n", "2", sys.executable, example, "--epochs", "3"], env=env(),
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    losses = [float(l.rsplit(" ", 1)[1]) for l in p.stdout.splitlines() if "loss" in l]
    assert len(losses) == 3, p.stdout
    assert losses[-1] < losses[0] * 0.6, losses
