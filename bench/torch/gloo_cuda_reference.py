"""Gloo's all-reduce, all-gather and broadcast on CUDA tensors: the reference beside
`ringlet-bench --device cuda` on a machine with PyTorch and a GPU (NCCL refuses several ranks on
one GPU, so on a one-GPU machine gloo is the library to compare with).

    torchrun --nproc-per-node 2 bench/torch/gloo_cuda_reference.py [--max-bytes 256M] [--json F]

Every rank uses GPU local_rank % (GPUs). Each size is warmed up, then timed as `iters` calls
followed by torch.cuda.synchronize(); the time is the slowest rank's. busbw uses nccl-tests'
factors: all-reduce 2(n-1)/n, all-gather (n-1)/n, broadcast 1.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-bytes", default="8")
    p.add_argument("--max-bytes", default="256M")
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--ops", default="allreduce,allgather,broadcast")
    p.add_argument("--min-time-ms", type=float, default=100)
    p.add_argument("--json", default="")
    a = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    factor = {"allreduce": 2 * (n - 1) / n, "allgather": (n - 1) / n, "broadcast": 1.0}
    rows = []
    if rank == 0:
        print(f"# gloo on CUDA tensors, float32, {n} ranks, {torch.cuda.get_device_name(dev)}, "
              f"torch {torch.__version__}")
        print(f"{'op':>10} {'bytes':>10} {'time us':>11} {'algbw':>8} {'busbw':>8}")
    for opname in a.ops.split(","):
        size = parse_size(a.min_bytes)
        while size <= parse_size(a.max_bytes):
            count = max(size // 4, 1)
            if opname == "allgather":
                count = max(count // n, 1)
                src = torch.ones(count, device=dev)
                out = [torch.empty(count, device=dev) for _ in range(n)]
                fn = lambda: dist.all_gather(out, src)  # noqa: E731
                total = count * n * 4
            else:
                t = torch.ones(count, device=dev)
                fn = (lambda: dist.all_reduce(t)) if opname == "allreduce" else \
                    (lambda: dist.broadcast(t, 0))
                total = count * 4
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            iters = 1
            while True:
                start = time.perf_counter()
                for _ in range(iters):
                    fn()
                torch.cuda.synchronize()
                took = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
                dist.all_reduce(took, dist.ReduceOp.MAX)
                if took.item() * 1000 >= a.min_time_ms or iters >= 1 << 16:
                    break
                iters *= 2
            sec = took.item() / iters
            algbw = total / sec / 1e9
            row = {"op": opname, "bytes": total, "seconds": sec, "algbw_gbs": algbw,
                   "busbw_gbs": algbw * factor[opname]}
            rows.append(row)
            if rank == 0:
                print(f"{opname:>10} {total:>10} {sec * 1e6:>11.2f} {algbw:>8.3f} "
                      f"{row['busbw_gbs']:>8.3f}", flush=True)
            size *= a.factor
    if rank == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"ranks": n, "backend": "gloo", "device": torch.cuda.get_device_name(dev),
                       "torch": torch.__version__, "rows": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
