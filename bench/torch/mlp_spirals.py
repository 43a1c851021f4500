"""PyTorch training the trainer's MLP on interleaved spirals: samples/s on one rank.

    /usr/bin/python3 bench/torch/mlp_spirals.py [--batch 32] [--threads 1] [--json F]

The model and task are ringlet-train --model mlp's: 2 inputs, --layers hidden layers of --hidden
units with GELU, --classes outputs, cross-entropy, AdamW (lr 3e-3, weight decay 0.01), batches
drawn at random from 1000 points per class. A timed step draws the batch, zeroes the gradients,
runs forward, backward and the optimizer, like a step of ringlet-train (its --json reports the
same median). Reports samples/s from the median step time after warm-up steps.
"""
import argparse
import json
import math
import statistics
import time

import torch


def spirals(points_per_class, classes, noise, generator):
    xs, ys = [], []
    for c in range(classes):
        r = torch.linspace(0.0, 1.0, points_per_class)
        t = torch.linspace(c * 4.0, (c + 1) * 4.0, points_per_class) + \
            noise * torch.randn(points_per_class, generator=generator)
        xs.append(torch.stack([r * torch.sin(t * 2.5 / math.pi), r * torch.cos(t * 2.5 / math.pi)], 1))
        ys.append(torch.full((points_per_class,), c, dtype=torch.long))
    return torch.cat(xs), torch.cat(ys)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--classes", type=int, default=3)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1234)
    x, y = spirals(1000, a.classes, 0.02, g)
    sizes = [2] + [a.hidden] * a.layers + [a.classes]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.GELU())
    model = torch.nn.Sequential(*layers)
    params = sum(q.numel() for q in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    times = []
    for step in range(a.warmup + a.steps):
        start = time.perf_counter()
        idx = torch.randint(0, x.shape[0], (a.batch,), generator=g)
        xb, yb = x[idx], y[idx]
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - start)
    step_s = statistics.median(times)
    out = {"model": "mlp", "params": params, "threads": a.threads, "batch_per_rank": a.batch,
           "steps_timed": len(times), "step_ms": step_s * 1e3, "samples_per_s": a.batch / step_s}
    print(json.dumps(out), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
