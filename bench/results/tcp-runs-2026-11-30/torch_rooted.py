"""8-byte dist.broadcast / dist.reduce from rank 0 through ringlet and gloo, in turn (us a call)."""
import datetime, time, statistics
import torch, torch.distributed as dist
import ringlet_torch  # noqa: F401
dist.init_process_group("ringlet", timeout=datetime.timedelta(seconds=120))
groups = {"ringlet": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
t = torch.ones(2)
ops = {"broadcast": lambda g: dist.broadcast(t, 0, group=g), "reduce": lambda g: dist.reduce(t, 0, group=g)}
res = {}
for rnd in range(3):
    for op, fn in ops.items():
        for name, g in groups.items():
            for _ in range(2000): fn(g)
            dist.barrier(group=g)
            start = time.perf_counter()
            for _ in range(20000): fn(g)
            dist.barrier(group=g)
            res.setdefault((op, name), []).append((time.perf_counter() - start) / 20000 * 1e6)
if dist.get_rank() == 0:
    for (op, name), v in sorted(res.items()):
        print(f"{op:10s} {name:8s} median {statistics.median(v):7.2f} us  rounds {' '.join(f'{x:.2f}' for x in v)}")
dist.destroy_process_group()
