"""PyTorch DistributedDataParallel on ringlet: an ordinary DDP script with one extra import.

Run it with either launcher (PYTHONPATH must reach ringlet_torch: build/python, or install it
with `cmake --install build`):

    ringlet-run -n 2 /usr/bin/python3 examples/pytorch/ddp_train.py
    torchrun --nproc_per_node=2 --redirects 1 --tee 1 examples/pytorch/ddp_train.py

It trains a small classifier on synthetic data and prints the loss from rank 0.
"""
import argparse
import datetime

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import ringlet_torch  # noqa: F401  (registers the "ringlet" backend)


def main():
    p = argparse.ArgumentParser(description="DDP on ringlet")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--backend", default="ringlet", help="ringlet, or gloo to compare")
    a = p.parse_args()

    # RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from the launcher (env://).
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same data and initial model on every rank
    x = torch.randn(4096, 20)
    y = (x[:, :10].sum(1) > x[:, 10:].sum(1)).long()
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True)
    loader = DataLoader(data, batch_size=64, sampler=sampler)

    model = DDP(torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        total, batches = torch.zeros(1), 0
        for xb, yb in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()  # DDP all-reduces the gradients here, bucket by bucket
            opt.step()
            total += loss.detach()
            batches += 1
        dist.all_reduce(total)  # the mean loss over every rank's batches
        if rank == 0:
            print(f"epoch {epoch}: loss {total.item() / (batches * world):.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
