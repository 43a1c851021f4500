"""torch.distributed.all_reduce through ringlet and through gloo, side by side in one run.

    ringlet-run -n 2 /usr/bin/python3 bench/torch/allreduce_vs_gloo.py [--max-bytes 64M] [--json F]

(PYTHONPATH must reach ringlet_torch: build/python.) Both backends run in the same processes,
size by size, alternating, each warmed up by time; the time of a size is the median of several
timed batches on rank 0, each batch ended by the slowest rank (a barrier-free max: every rank
all-reduces its batch time). busbw = bytes * 2(n-1)/n / time, as nccl-tests counts it.
"""
import argparse
import datetime
import json
import statistics
import time

import torch
import torch.distributed as dist

import ringlet_torch  # noqa: F401


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def seconds_per_call(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def agreed_max(value, group):
    """The largest of every rank's value (every rank must run the same number of calls)."""
    t = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(t, dist.ReduceOp.MAX, group=group)
    return t.item()


def calls_for(fn, seconds, group):
    """Warms fn up for about `seconds`, then says how many calls take that long (all ranks agree)."""
    calls = 1
    while True:
        took = agreed_max(seconds_per_call(fn, calls) * calls, group)
        if took >= seconds:
            return max(calls, 3)
        calls = calls * 2 if took < seconds / 8 else int(calls * seconds / took) + 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-bytes", default="8")
    p.add_argument("--max-bytes", default="64M")
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--batch-ms", type=float, default=60)
    p.add_argument("--json", default="")
    a = p.parse_args()
    dist.init_process_group("ringlet", timeout=datetime.timedelta(seconds=120))
    rank, n = dist.get_rank(), dist.get_world_size()
    groups = {"ringlet": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rows = []
    size = parse_size(a.min_bytes)
    if rank == 0:
        print(f"# torch.distributed.all_reduce float32 sum, {n} ranks; time = median of "
              f"{a.batches} batches of >= {a.batch_ms} ms")
        print(f"{'bytes':>10} {'ringlet us':>11} {'busbw':>7} {'gloo us':>11} {'busbw':>7} "
              f"{'ratio':>7}")
    while size <= parse_size(a.max_bytes):
        t = torch.ones(max(size // 4, 1))
        row = {"bytes": t.numel() * 4}
        for name, group in groups.items():
            op = lambda: dist.all_reduce(t, group=group)  # noqa: E731
            calls = calls_for(op, a.batch_ms / 1000, groups["gloo"])  # also the warm-up
            samples = [agreed_max(seconds_per_call(op, calls), groups["gloo"])
                       for _ in range(a.batches)]
            sec = statistics.median(samples)
            row[name] = {"seconds": sec, "busbw_gbs": row["bytes"] * 2 * (n - 1) / n / sec / 1e9}
        row["ratio"] = row["gloo"]["seconds"] / row["ringlet"]["seconds"]
        rows.append(row)
        if rank == 0:
            print(f"{row['bytes']:>10} {row['ringlet']['seconds'] * 1e6:>11.2f} "
                  f"{row['ringlet']['busbw_gbs']:>7.2f} {row['gloo']['seconds'] * 1e6:>11.2f} "
                  f"{row['gloo']['busbw_gbs']:>7.2f} {row['ratio']:>6.2f}x", flush=True)
        size *= 4 if size < (1 << 20) else 2
    if rank == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"ranks": n, "op": "all_reduce float32 sum", "rows": rows}, f, indent=1)
    dist.barrier()


if __name__ == "__main__":
    main()
