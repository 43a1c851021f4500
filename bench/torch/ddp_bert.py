"""PyTorch DDP training a small BERT-like encoder: samples/s on a backend, or on one rank alone.

    ringlet-run -n 2 /usr/bin/python3 bench/torch/ddp_bert.py --backend ringlet [--json F]
    /usr/bin/python3 bench/torch/ddp_bert.py --backend none          # one rank, no DDP

The model is the trainer's small BERT (hidden 128, 4 heads, FFN 512, 2 layers, sequence 64,
batch 32 per rank, AdamW). Each rank uses one thread (torch.set_num_threads(1)), like the ranks
of ringlet-run and torchrun (which sets OMP_NUM_THREADS=1); --threads changes it. --no-sync runs
every step under DDP's no_sync() (no gradient all-reduce): the step's time without communication. Reports samples/s over all ranks, from the median step time of the
timed steps, after warm-up steps.
"""
import argparse
import contextlib
import datetime
import json
import statistics
import time

import torch
import torch.distributed as dist


class Encoder(torch.nn.Module):
    def __init__(self, vocab=1000, hidden=128, heads=4, ffn=512, layers=2, seq=64, classes=4):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, hidden)
        self.pos = torch.nn.Parameter(torch.zeros(seq, hidden))
        layer = torch.nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.1,
                                                 batch_first=True, activation="gelu")
        self.body = torch.nn.TransformerEncoder(layer, layers)
        self.norm = torch.nn.LayerNorm(hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, ids):
        x = self.tok(ids) + self.pos
        return self.head(self.norm(self.body(x))[:, 0])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="ringlet", help="ringlet, gloo, or none (one rank)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--vocab", type=int, default=1000,
                   help="token ids drawn from [0, vocab) (ringlet-train --task cls: 21)")
    p.add_argument("--classes", type=int, default=4, help="classes (ringlet-train --task cls: 2)")
    p.add_argument("--no-sync", action="store_true",
                   help="every step under DDP's no_sync(): no gradient all-reduce (its cost)")
    p.add_argument("--json", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    rank, n = 0, 1
    if a.backend != "none":
        if a.backend == "ringlet":
            import ringlet_torch  # noqa: F401
        dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=120))
        rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = Encoder(vocab=a.vocab, classes=a.classes)
    params = sum(p.numel() for p in model.parameters())
    if n > 1 or a.backend != "none":
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    times = []
    forwards = []  # the forward pass alone: no communication, the run's own reference
    for step in range(a.warmup + a.steps):
        ids = torch.randint(0, a.vocab, (a.batch, 64), generator=g)
        y = torch.randint(0, a.classes, (a.batch,), generator=g)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with model.no_sync() if a.no_sync and n > 1 else contextlib.nullcontext():
            logits = model(ids)
            forward_end = time.perf_counter()
            torch.nn.functional.cross_entropy(logits, y).backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - start)
            forwards.append(forward_end - start)
    step_s = statistics.median(times)
    forward_s = statistics.median(forwards)
    if n > 1:
        t = torch.tensor([step_s, forward_s], dtype=torch.float64)
        dist.all_reduce(t, dist.ReduceOp.MAX)
        step_s, forward_s = t.tolist()
    out = {"backend": a.backend, "ranks": n, "threads": a.threads, "no_sync": a.no_sync, "params": params, "batch_per_rank": a.batch,
           "step_ms": step_s * 1e3, "forward_ms": forward_s * 1e3, "samples_per_s": n * a.batch / step_s}
    if rank == 0:
        print(json.dumps(out), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f)
    if n > 1:
        dist.barrier()


if __name__ == "__main__":
    main()
