"""One rank of a test run: python3 workers.py SCENARIO [ARGS...].

The environment says who this rank is (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: env://).
A scenario checks its own results against a reference computed here (and against gloo's where
gloo has the operation) and raises on the first difference; it prints "RESULT {json}" lines for
the test to read. Exit status 0 means every check passed.
"""
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import ringlet_torch  # noqa: F401  (registers the backend)

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
DTYPES = FLOATS + INTS
# Types ringlet does not reduce but still moves (as bytes).
MOVED_ONLY = [torch.bool, torch.int16, torch.complex64]
OPS = {
    "sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG,
}
# ReduceOps gloo has in torch 1.13 (no AVG), and the types it reduces (no bfloat16).
GLOO_OPS = {"sum", "prod", "min", "max"}
GLOO_TYPES = [torch.float32, torch.float64, torch.float16] + INTS


def result(**kv):
    print("RESULT " + json.dumps(kv), flush=True)


def init(backend="ringlet", timeout_s=60):
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def data(rank, count, dtype, op="sum"):
    """Exact in every type: small integers that depend on position and rank."""
    j = torch.arange(count)
    v = 1 + (j + rank) % 2 if op == "prod" else (j % 5) + rank + 1
    if dtype == torch.bool:
        return (v % 2).bool()
    if dtype.is_complex:
        return torch.complex(v.float(), -v.float()).to(dtype)
    return v.to(dtype)


def reference(n, count, dtype, op):
    stack = torch.stack([data(r, count, dtype, op).double() for r in range(n)])
    out = {
        "sum": lambda: stack.sum(0), "prod": lambda: stack.prod(0),
        "min": lambda: stack.min(0).values if count else stack.sum(0),
        "max": lambda: stack.max(0).values if count else stack.sum(0),
        "avg": lambda: stack.sum(0) / n,
    }[op]()
    return out.to(dtype)


def check(got, want, what):
    if got.dtype in (torch.float16, torch.bfloat16) or (got.is_floating_point() and "avg" in what):
        tol = {torch.float16: 1e-3, torch.bfloat16: 1e-2}.get(got.dtype, 1e-6)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, msg=lambda m: f"{what}: {m}")
    elif not torch.equal(got, want):
        diff = (got != want).nonzero()
        raise AssertionError(f"{what}: {diff.numel()} wrong elements, first at {diff[0].tolist()}: "
                             f"got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}")


def strided(t):
    """A non-contiguous view holding t's values (every other element of a wider buffer)."""
    base = torch.zeros(t.numel(), 2, dtype=t.dtype)
    base[:, 0] = t
    return base[:, 0], base


def scenario_ops():
    """Every operation, type and reduction, with counts that do not divide evenly."""
    rank, n = init()
    gloo = dist.new_group(backend="gloo")
    counts = [0, 1, n + 1, 1009]
    checks = 0
    for dtype in DTYPES:
        for name, op in OPS.items():
            if name == "avg" and dtype in INTS:
                continue
            for count in counts:
                what = f"{name} {dtype} count {count}"
                want = reference(n, count, dtype, name)
                t = data(rank, count, dtype, name)
                dist.all_reduce(t, op)
                check(t, want, "all_reduce " + what)
                if dtype in GLOO_TYPES and name in GLOO_OPS:
                    g = data(rank, count, dtype, name)
                    dist.all_reduce(g, op, group=gloo)
                    check(t, g, "all_reduce vs gloo " + what)
                # Non-contiguous: reduced through a copy, the rest of the buffer untouched.
                v, base = strided(data(rank, count, dtype, name))
                dist.all_reduce(v, op)
                check(v, want, "non-contiguous all_reduce " + what)
                check(base[:, 1], torch.zeros(count, dtype=dtype), "untouched " + what)
                root = count % n
                t = data(rank, count, dtype, name)
                dist.reduce(t, root, op)
                if rank == root:
                    check(t, want, f"reduce root {root} " + what)
                # Reduce-scatter: rank r ends with block r of the reduced n*count elements.
                full = reference(n, n * count, dtype, name)
                mine = full[rank * count:(rank + 1) * count]
                src = data(rank, n * count, dtype, name)
                out = torch.full((count,), 99, dtype=dtype)
                dist.reduce_scatter(out, list(src.split(count)) if count else
                                    [torch.empty(0, dtype=dtype)] * n, op)
                check(out, mine, "reduce_scatter " + what)
                out = torch.full((count,), 99, dtype=dtype)
                dist.reduce_scatter_tensor(out, src, op)
                check(out, mine, "reduce_scatter_tensor " + what)
                if count:
                    # In place: the output is this rank's block of the inputs' one buffer.
                    views = list(data(rank, n * count, dtype, name).split(count))
                    dist.reduce_scatter(views[rank], views, op)
                    check(views[rank], mine, "reduce_scatter in place " + what)
                checks += 7
            # Uneven blocks: reduce_scatter with blocks of their own size (the v form).
            sizes = [r + 1 for r in range(n)]
            src = data(rank, sum(sizes), dtype)
            full = reference(n, sum(sizes), dtype, "sum")
            out = torch.empty(sizes[rank], dtype=dtype)
            dist.reduce_scatter(out, list(src.split(sizes)))
            check(out, full[sum(sizes[:rank]):sum(sizes[:rank + 1])], f"uneven reduce_scatter {dtype}")
        ts = [data(rank, c, dtype) for c in (3, 0, 7)]
        dist.all_reduce_coalesced(ts)
        for t, c in zip(ts, (3, 0, 7)):
            check(t, reference(n, c, dtype, "sum"), f"all_reduce_coalesced {dtype}")
        # Views of one buffer (a flat bucket), reduced where they lie; the rest untouched.
        bucket = torch.cat([data(rank, 10, dtype), torch.zeros(2, dtype=dtype)])
        dist.all_reduce_coalesced([bucket[:3], bucket[3:10]])
        check(bucket[:10], reference(n, 10, dtype, "sum"), f"all_reduce_coalesced of views {dtype}")
        check(bucket[10:], torch.zeros(2, dtype=dtype), f"all_reduce_coalesced untouched {dtype}")
        checks += 4
    for dtype in DTYPES + MOVED_ONLY:
        for count in counts:
            what = f"{dtype} count {count}"
            mine = data(rank, count, dtype)
            everyone = [data(r, count, dtype) for r in range(n)]
            for root in range(n):
                t = mine.clone() if rank == root else torch.zeros(count, dtype=dtype)
                dist.broadcast(t, root)
                check(t, everyone[root], f"broadcast root {root} " + what)
            outs = [torch.zeros(count, dtype=dtype) for _ in range(n)]
            dist.all_gather(outs, mine)
            for r in range(n):
                check(outs[r], everyone[r], f"all_gather from {r} " + what)
            flat = torch.zeros(n * count, dtype=dtype)
            dist.all_gather_into_tensor(flat, mine)
            check(flat, torch.cat(everyone), "all_gather_into_tensor " + what)
            root = (count + 1) % n
            gathered = [torch.zeros(count, dtype=dtype) for _ in range(n)] if rank == root else None
            dist.gather(mine, gathered, dst=root)
            if rank == root:
                for r in range(n):
                    check(gathered[r], everyone[r], f"gather root {root} from {r} " + what)
            pieces = [data(100 + q, count, dtype) for q in range(n)]
            out = torch.zeros(count, dtype=dtype)
            dist.scatter(out, pieces if rank == root else None, src=root)
            check(out, data(100 + rank, count, dtype), f"scatter root {root} " + what)
            # All-to-all: block q of rank r is data(10*r + q); rank r receives data(10*q + r).
            send = torch.cat([data(10 * rank + q, count, dtype) for q in range(n)])
            recv = torch.zeros(n * count, dtype=dtype)
            dist.all_to_all_single(recv, send)
            want = torch.cat([data(10 * q + rank, count, dtype) for q in range(n)])
            check(recv, want, "all_to_all_single " + what)
            if dtype in GLOO_TYPES:
                g = torch.zeros(n * count, dtype=dtype)
                dist.all_to_all_single(g, send, group=gloo)
                check(recv, g, "all_to_all_single vs gloo " + what)
                gb = mine.clone() if rank == 0 else torch.zeros(count, dtype=dtype)
                dist.broadcast(gb, 0, group=gloo)
                check(gb, everyone[0], "broadcast vs gloo " + what)
            checks += 6
            if count:
                # Lists that are views of one buffer: written and read where they lie (in place
                # too), the rest of the buffer untouched.
                buf = torch.full((n * count + 1,), 99, dtype=dtype)
                dist.all_gather(list(buf[:-1].split(count)), mine)
                check(buf[:-1], torch.cat(everyone), "all_gather into views " + what)
                check(buf[-1:], torch.full((1,), 99, dtype=dtype), "all_gather untouched " + what)
                views = list(torch.zeros(n * count, dtype=dtype).split(count))
                views[rank].copy_(mine)
                dist.all_gather(views, views[rank])
                check(torch.cat(views), torch.cat(everyone), "all_gather in place " + what)
                buf = torch.zeros(n * count, dtype=dtype)
                dist.gather(mine, list(buf.split(count)) if rank == root else None, dst=root)
                if rank == root:
                    check(buf, torch.cat(everyone), f"gather into views root {root} " + what)
                out = torch.zeros(count, dtype=dtype)
                whole = torch.cat(pieces)
                dist.scatter(out, list(whole.split(count)) if rank == root else None, src=root)
                check(out, data(100 + rank, count, dtype), f"scatter from views root {root} " + what)
                buf = torch.zeros(n * count, dtype=dtype)
                dist.all_to_all(list(buf.split(count)), list(send.split(count)))
                check(buf, want, "all_to_all of views " + what)
                checks += 5
        # Split sizes: rank r sends q+r+1 rows of 2 elements to rank q.
        send_rows = [q + rank + 1 for q in range(n)]
        recv_rows = [rank + q + 1 for q in range(n)]
        send = torch.cat([data(10 * rank + q, 2 * k, dtype) for q, k in enumerate(send_rows)]).view(-1, 2)
        recv = torch.zeros(sum(recv_rows), 2, dtype=dtype)
        dist.all_to_all_single(recv, send, recv_rows, send_rows)
        want = torch.cat([data(10 * q + rank, 2 * k, dtype) for q, k in enumerate(recv_rows)]).view(-1, 2)
        check(recv, want, f"all_to_all_single with splits {dtype}")
        outs = [torch.zeros(q + 1, dtype=dtype) for q in range(n)]
        dist.all_to_all(outs, [data(10 * rank + q, rank + 1, dtype) for q in range(n)])
        for q in range(n):
            check(outs[q], data(10 * q + rank, q + 1, dtype), f"all_to_all list from {q} {dtype}")
        # Uneven all_gather: rank r contributes r+1 elements.
        outs = [torch.zeros(r + 1, dtype=dtype) for r in range(n)]
        dist.all_gather(outs, data(rank, rank + 1, dtype))
        for r in range(n):
            check(outs[r], data(r, r + 1, dtype), f"uneven all_gather from {r} {dtype}")
        lists = [[torch.zeros(c, dtype=dtype) for _ in range(n)] for c in (2, 5)]
        dist.all_gather_coalesced(lists, [data(rank, 2, dtype), data(rank, 5, dtype)])
        for l, c in zip(lists, (2, 5)):
            for r in range(n):
                check(l[r], data(r, c, dtype), f"all_gather_coalesced {dtype}")
        # Point to point around the ring, with tags.
        nxt, prv = (rank + 1) % n, (rank - 1) % n
        got = torch.zeros(17, dtype=dtype)
        if rank % 2 == 0:
            dist.send(data(rank, 17, dtype), nxt, tag=7)
            dist.recv(got, prv, tag=7)
        else:
            dist.recv(got, prv, tag=7)
            dist.send(data(rank, 17, dtype), nxt, tag=7)
        check(got, data(prv, 17, dtype), f"send/recv {dtype}")
        # Tags matched out of order (as gloo matches them): sent as tags 1, 2, 3, received as
        # 3, 1, 2 (the first two wait, whole, for their recv).
        sizes = {1: 70001, 2: 5, 3: 3}

        def send_tags():
            for tag in (1, 2, 3):
                dist.send(data(rank + tag, sizes[tag], dtype), nxt, tag=tag)

        def recv_tags():
            for tag in (3, 1, 2):
                got = torch.zeros(sizes[tag], dtype=dtype)
                dist.recv(got, prv, tag=tag)
                check(got, data(prv + tag, sizes[tag], dtype), f"recv tag {tag} {dtype}")

        if rank % 2 == 0:
            send_tags()
            recv_tags()
        else:
            recv_tags()
            send_tags()
        checks += 7
    # Non-contiguous outputs of the moving operations.
    t = data(0, 5, torch.float32) if rank == 0 else torch.zeros(5)
    v, base = strided(t)
    dist.broadcast(v, 0)
    check(v, data(0, 5, torch.float32), "non-contiguous broadcast")
    dist.barrier()
    result(checks=checks, n=n)


def scenario_large():
    """Sizes that take many pipeline segments, against gloo."""
    rank, n = init()
    gloo = dist.new_group(backend="gloo")
    for count in (1 << 20, (1 << 22) + 3):
        t = torch.randn(count, generator=torch.Generator().manual_seed(rank))
        g = t.clone()
        dist.all_reduce(t)
        dist.all_reduce(g, group=gloo)
        torch.testing.assert_close(t, g, rtol=1e-5, atol=1e-5)
        outs = [torch.empty(count) for _ in range(n)]
        dist.all_gather(outs, t)
        for o in outs:
            check(o, t, "large all_gather of identical tensors")
    result(ok=True)


def scenario_async():
    """Work handles and futures behave like gloo's."""
    rank, n = init()
    works, tensors = [], []
    for i in range(20):
        t = torch.full((1000,), float(rank + i))
        tensors.append(t)
        works.append(dist.all_reduce(t, async_op=True))
    futs = [w.get_future() for w in works]
    chained = futs[-1].then(lambda f: f.value()[0] * 2)
    for i, w in enumerate(works):
        assert w.wait() is True
        assert w.is_completed() and w.is_success()
        want = float(sum(r + i for r in range(n)))
        check(tensors[i], torch.full((1000,), want), f"async all_reduce {i}")
        check(futs[i].value()[0], torch.full((1000,), want), f"future value {i}")
    check(chained.wait(), torch.full((1000,), 2.0 * sum(r + 19 for r in range(n))), "then()")
    # is_completed() turns true without wait(): the group's thread runs the queue.
    t = torch.ones(10)
    w = dist.all_reduce(t, async_op=True)
    deadline = time.monotonic() + 30
    while not w.is_completed():
        assert time.monotonic() < deadline, "an async all_reduce never completed by itself"
        time.sleep(0.001)
    check(t, torch.full((10,), float(n)), "polled all_reduce")
    # After a run of blocking calls (each run by its caller) the group's thread is woken for no
    # Work; an async one still completes by itself, polled or through its future.
    for _ in range(40):
        dist.all_reduce(torch.ones(2))
    for how in ("polled", "future"):
        t = torch.ones(10)
        w = dist.all_reduce(t, async_op=True)
        start = time.monotonic()
        if how == "future":
            w.get_future().wait()
        while not w.is_completed():
            assert time.monotonic() < start + 30, f"an async all_reduce after blocking ones ({how})"
            time.sleep(0.0002)
        check(t, torch.full((10,), float(n)), f"{how} all_reduce after blocking ones")
    # Async operations of every kind, waited in reverse order.
    outs = [torch.zeros(4) for _ in range(n)]
    ws = [dist.all_gather(outs, torch.full((4,), float(rank)), async_op=True),
          dist.broadcast(torch.zeros(3) if rank else torch.ones(3), 0, async_op=True),
          dist.barrier(async_op=True)]
    for w in reversed(ws):
        w.wait()
    for r in range(n):
        check(outs[r], torch.full((4,), float(r)), "async all_gather")
    # isend/irecv around the ring.
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    got = torch.zeros(100)
    reqs = [dist.isend(torch.full((100,), float(rank)), nxt), dist.irecv(got, prv)]
    for q in reqs:
        q.wait()
    check(got, torch.full((100,), float(prv)), "isend/irecv")
    result(ok=True)


def scenario_p2p():
    """isend/irecv in the order pipeline code posts them: every rank sends first, large messages."""
    rank, n = init()
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    for count in (1, 1000, 1 << 20, (1 << 22) + 5):
        send = data(rank, count, torch.float32)
        got = torch.zeros(count)
        ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, got, prv)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        check(got, data(prv, count, torch.float32), f"ring isend/irecv of {count}")
        # Both directions of every pair at once.
        if n == 2 or rank < 2:
            other = 1 - rank if rank < 2 else None
            if other is not None:
                a, b = data(10 + rank, count, torch.float32), torch.zeros(count)
                ws = [dist.isend(a, other), dist.irecv(b, other)]
                for w in ws:
                    w.wait()
                check(b, data(10 + other, count, torch.float32), f"exchange of {count}")
    result(ok=True)


def scenario_any_source():
    """recv and irecv without src: every sender's message, its rank returned; other tags wait."""
    rank, n = init()
    sizes = {3: 1000, 4: (1 << 20) + 5}
    if rank != 0:
        # Tag 4 (large) first: rank 0 takes the tag-3 messages before it looks for those.
        dist.send(data(rank, sizes[4], torch.float32), 0, tag=4)
        dist.send(data(rank, sizes[3], torch.float32), 0, tag=3)
    else:
        seen = []
        for _ in range(n - 1):
            got = torch.zeros(sizes[3])
            src = dist.recv(got, tag=3)
            check(got, data(src, sizes[3], torch.float32), f"recv without src (from {src})")
            seen.append(src)
        if sorted(seen) != list(range(1, n)):
            raise AssertionError(f"recv without src returned ranks {seen}, want 1..{n - 1}")
        seen = []
        for _ in range(n - 1):
            got = torch.zeros(sizes[4])
            work = dist.irecv(got, tag=4)
            work.wait()
            src = work._source_rank()
            check(got, data(src, sizes[4], torch.float32), f"irecv without src (from {src})")
            seen.append(src)
        if sorted(seen) != list(range(1, n)):
            raise AssertionError(f"irecv without src reported ranks {seen}, want 1..{n - 1}")
    # The collectives' sequence is untouched.
    t = torch.ones(3)
    dist.all_reduce(t)
    check(t, torch.full((3,), float(n)), "all_reduce after recv from any source")
    result(ok=True)


def scenario_groups():
    """Several groups (new_group) side by side, used from several threads at once."""
    import threading
    rank, n = init()
    evens = dist.new_group([r for r in range(n) if r % 2 == 0], backend="ringlet")
    odds = dist.new_group([r for r in range(n) if r % 2 == 1], backend="ringlet")
    mine = evens if rank % 2 == 0 else odds
    members = [r for r in range(n) if r % 2 == rank % 2]
    world = dist.group.WORLD
    errors = []

    def hammer(group, want, label):
        try:
            for i in range(200):
                t = torch.full((257,), float(rank + i))
                dist.all_reduce(t, group=group)
                check(t, torch.full((257,), float(sum(r + i for r in want))), label)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=hammer, args=(mine, members, "sub-group")),
               threading.Thread(target=hammer, args=(world, list(range(n)), "world"))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    result(links=ringlet_torch.backend_of(world).describe_links())


def scenario_errors():
    """Bad calls give a RuntimeError that names the problem, before anything is sent."""
    rank, n = init()
    bad = []

    def expect(fn, *words):
        try:
            fn()
        except RuntimeError as e:
            text = str(e)
            if not all(w in text for w in words):
                bad.append(f"message {text!r} lacks {words}")
            return
        bad.append(f"no error for {words}")

    expect(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)), "allreduce", "int16")
    expect(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), dist.ReduceOp.AVG),
           "AVG", "int32")
    expect(lambda: dist.all_reduce(torch.ones(3), dist.ReduceOp.BAND), "BAND", "not supported")
    expect(lambda: dist.all_reduce(torch.ones(3).to_sparse()), "sparse")
    expect(lambda: dist.reduce(torch.ones(3), n + 3), "root rank", str(n + 3))
    expect(lambda: dist.all_gather([torch.ones(3)] * (n + 1), torch.ones(3)), "allgather")
    expect(lambda: dist.all_gather_into_tensor(torch.ones(3 * n + 1), torch.ones(3)),
           "_allgather_base", "elements")
    expect(lambda: dist.reduce_scatter_tensor(torch.ones(2), torch.ones(2 * n + 1)),
           "_reduce_scatter_base")
    expect(lambda: dist.all_to_all_single(torch.ones(n), torch.ones(n), [1] * n, [2] * n),
           "alltoall_base", "split sizes add up")
    # backend_of() finds ringlet's object behind the default group, and names another backend.
    if not isinstance(ringlet_torch.backend_of(), ringlet_torch.ProcessGroupRinglet):
        bad.append("backend_of() of the default group is not a ProcessGroupRinglet")
    gloo = dist.new_group(backend="gloo")
    expect(lambda: ringlet_torch.backend_of(gloo), "backend_of", "not ringlet")
    # The group still works after the refused calls (nothing was sent).
    t = torch.ones(5)
    dist.all_reduce(t)
    check(t, torch.full((5,), float(n)), "all_reduce after refused calls")
    # Ranks that disagree on a call's arguments get an error, not a hang or wrong data.
    try:
        dist.all_reduce(torch.ones(4 if rank == 0 else 5))
        bad.append("no error for all_reduce with different counts on different ranks")
    except RuntimeError as e:
        if "ringlet" not in str(e):
            bad.append(f"count mismatch message: {e}")
    if bad:
        raise AssertionError("; ".join(bad))
    result(ok=True)


def scenario_die():
    """The last rank dies; the others must get a RuntimeError naming it, within the timeout."""
    timeout_s = float(sys.argv[2])
    rank, n = init(timeout_s=timeout_s)
    t = torch.ones(1 << 16)
    dist.all_reduce(t)
    if rank == n - 1:
        os._exit(3)
    time.sleep(0.2)
    start = time.monotonic()
    try:
        for _ in range(100):
            dist.all_reduce(t)
        raise AssertionError("all_reduce went on with a dead rank")
    except RuntimeError as e:
        result(error=str(e), seconds=time.monotonic() - start)
    os._exit(0)  # the default group cannot be torn down cleanly with a dead member


def scenario_silent():
    """The last rank stays alive but never calls: the others time out within the group's timeout."""
    timeout_s = float(sys.argv[2])
    rank, n = init(timeout_s=timeout_s)
    dist.barrier()
    if rank == n - 1:
        time.sleep(timeout_s * 3)
        os._exit(0)
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(8))
        raise AssertionError("all_reduce returned although a rank never called it")
    except RuntimeError as e:
        result(error=str(e), seconds=time.monotonic() - start)
    os._exit(0)


def scenario_any_source_silent():
    """A recv without src that no rank answers ends by the group's timeout, naming its tag."""
    timeout_s = float(sys.argv[2])
    rank, n = init(timeout_s=timeout_s)
    dist.barrier()
    if rank != 0:
        time.sleep(timeout_s * 3)
        os._exit(0)
    start = time.monotonic()
    try:
        dist.recv(torch.ones(8), tag=9)
        raise AssertionError("recv without src returned although no rank sent")
    except RuntimeError as e:
        result(error=str(e), seconds=time.monotonic() - start)
    os._exit(0)


def scenario_any_source_shutdown():
    """A pending irecv without src does not hold up destroying the group: it ends with an error."""
    rank, n = init(timeout_s=60)
    dist.barrier()
    if rank == 0:
        work = dist.irecv(torch.ones(8), tag=9)
        time.sleep(0.2)
        start = time.monotonic()
        dist.destroy_process_group()
        seconds = time.monotonic() - start
        try:
            work.wait()
            raise AssertionError("irecv without src completed although no rank sent")
        except RuntimeError as e:
            result(error=str(e), seconds=seconds)
    else:
        time.sleep(1)
    os._exit(0)


def scenario_op_timeout():
    """A per-operation timeout (AllreduceOptions.timeout) ends that call long before the group's."""
    rank, n = init(timeout_s=60)
    dist.barrier()
    if rank == n - 1:
        time.sleep(5)  # alive (else rank 0 sees it leave), silent, past rank 0's 0.5 s
        os._exit(0)
    pg = dist.distributed_c10d._get_default_group()
    opts = dist.AllreduceOptions()
    opts.timeout = datetime.timedelta(milliseconds=500)
    start = time.monotonic()
    try:
        pg.allreduce([torch.ones(8)], opts).wait()
        raise AssertionError("all_reduce returned although a rank never called it")
    except RuntimeError as e:
        result(error=str(e), seconds=time.monotonic() - start)
    os._exit(0)


def scenario_ddp():
    """PyTorch's DistributedDataParallel on a small model; saves the final parameters."""
    backend, steps, path = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    variant = sys.argv[5] if len(sys.argv) > 5 else "plain"
    rank, n = init(backend)
    torch.manual_seed(0)
    if variant == "plain":
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                                    torch.nn.Linear(64, 8))
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
    else:
        # BatchNorm buffers (broadcast every forward) and a branch that never runs
        # (find_unused_parameters: an int32 all-reduce of the used-parameter bitmap).
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Linear(32, 64)
                self.bn = torch.nn.BatchNorm1d(64)
                self.b = torch.nn.Linear(64, 8)
                self.unused = torch.nn.Linear(64, 8)

            def forward(self, x):
                return self.b(torch.tanh(self.bn(self.a(x))))

        model = Net()
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, bucket_cap_mb=0.01, find_unused_parameters=True, broadcast_buffers=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1234 + rank)
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g)
        y = torch.randn(16, 8, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    if rank == 0:
        torch.save([p.detach().clone() for p in model.parameters()] +
                   [b.detach().clone().double() for b in model.buffers()], path)
    dist.barrier()
    result(ok=True)


def scenario_coalesced():
    """PyTorch 2's coalescing manager: all_gather_into_tensor and reduce_scatter_tensor calls made
    inside it go to the backend as one coalesced call each (uneven sizes, three types), exact;
    pairs that do not fit are refused by name."""
    rank, n = init()
    from torch.distributed.distributed_c10d import _coalescing_manager
    sizes = [(5, torch.float32), (1000, torch.int64), (0, torch.float32), (33, torch.float64)]
    outs = [torch.full((n * c,), -1, dtype=t) for c, t in sizes]
    with _coalescing_manager(async_ops=True) as cm:
        for (c, t), out in zip(sizes, outs):
            dist.all_gather_into_tensor(out, data(rank, c, t))
    cm.wait()
    for (c, t), out in zip(sizes, outs):
        want = torch.cat([data(r, c, t) for r in range(n)])
        check(out, want, f"all_gather_into_tensor of {c} {t} in a coalescing manager")
    outs = [torch.full((c,), -1, dtype=t) for c, t in sizes]
    with _coalescing_manager():
        for (c, t), out in zip(sizes, outs):
            dist.reduce_scatter_tensor(out, data(rank, n * c, t))
    for (c, t), out in zip(sizes, outs):
        want = reference(n, n * c, t, "sum")[rank * c:(rank + 1) * c]
        check(out, want, f"reduce_scatter_tensor of {c} {t} in a coalescing manager")
    try:
        with _coalescing_manager():
            dist.all_gather_into_tensor(torch.empty(n * 4 + 1), torch.ones(4))
        raise AssertionError("a coalesced all-gather into a tensor of the wrong size went through")
    except RuntimeError as e:
        if "allgather_into_tensor_coalesced: the output has" not in str(e):
            raise
    dist.barrier()
    result(ok=True)


def scenario_hello():
    """For the launcher tests: one all_reduce and the environment it ran in."""
    rank, n = init()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    result(rank=rank, n=n, sum=t.item(), links=ringlet_torch.backend_of().describe_links())


def scenario_restart():
    """Under torchrun --max_restarts: in the first attempt the last rank dies after one
    all_reduce; the others must not hang (an error, or torchrun stops them). The next attempt
    starts every rank again on the same agent store and must run exactly (keys of the first
    attempt stay in that store, so a group that read them would mix the two jobs)."""
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    rank, n = init(timeout_s=20)
    t = data(rank, 4096, torch.float32)
    dist.all_reduce(t)
    check(t, reference(n, 4096, torch.float32, "sum"), f"all_reduce in attempt {attempt}")
    if attempt == 0:
        if rank == n - 1:
            os._exit(3)
        try:
            for _ in range(1000):
                dist.all_reduce(t)
            raise AssertionError("all_reduce went on with a dead rank")
        except RuntimeError as e:
            result(rank=rank, attempt=attempt, error=str(e))
        os._exit(4)  # this attempt failed; torchrun starts the next one
    b = data(rank, 999, torch.int64)
    dist.broadcast(b, src=n - 1)
    check(b, data(n - 1, 999, torch.int64), f"broadcast in attempt {attempt}")
    g = [torch.empty(33, dtype=torch.float64) for _ in range(n)]
    dist.all_gather(g, data(rank, 33, torch.float64))
    for r in range(n):
        check(g[r], data(r, 33, torch.float64), f"all_gather block {r} in attempt {attempt}")
    dist.barrier()
    result(rank=rank, n=n, attempt=attempt, links=ringlet_torch.backend_of().describe_links())


def scenario_stores():
    """ringlet over every kind of c10d store torch can hand it, one process group after another:
    file:// (FileStore), a PrefixStore around a FileStore, and a PrefixStore around a TCPStore
    of the test's own (not the env:// one); each group all-reduces and broadcasts exactly."""
    tmpdir = sys.argv[2]
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    port = int(os.environ["MASTER_PORT"]) + 1
    timeout = datetime.timedelta(seconds=60)
    # PyTorch 2 asks for a libuv TCPStore unless told otherwise (USE_LIBUV=0, as env:// reads
    # it); some builds (Debian's 2.6) have no libuv.
    libuv = {}
    if int(torch.__version__.split(".")[0]) >= 2:
        libuv = dict(use_libuv=os.environ.get("USE_LIBUV", "1") == "1")
    kinds = {
        "file://": lambda: dict(init_method=f"file://{tmpdir}/init-file"),
        "PrefixStore(FileStore)": lambda: dict(
            store=dist.PrefixStore("outer", dist.FileStore(f"{tmpdir}/prefix-file", n))),
        "PrefixStore(TCPStore)": lambda: dict(store=dist.PrefixStore("p", dist.TCPStore(
            "127.0.0.1", port, n, rank == 0, timeout, **libuv))),
    }
    checks = 0
    for name, args in kinds.items():
        dist.init_process_group("ringlet", rank=rank, world_size=n, timeout=timeout, **args())
        t = data(rank, 1000, torch.float32)
        dist.all_reduce(t)
        check(t, reference(n, 1000, torch.float32, "sum"), f"all_reduce over {name}")
        b = data(rank, 77, torch.int64)
        dist.broadcast(b, src=n - 1)
        check(b, data(n - 1, 77, torch.int64), f"broadcast over {name}")
        dist.barrier()
        dist.destroy_process_group()
        checks += 2
    result(ok=True, checks=checks)


def scenario_hash_store():
    """A HashStore (one process): ranks are threads that each make a ProcessGroupRinglet over the
    same store and all-reduce, as the backend's creator would be called."""
    import threading
    store = dist.HashStore()
    n = int(sys.argv[2])
    errors = []

    def rank_main(rank):
        try:
            pg = ringlet_torch.ProcessGroupRinglet(
                dist.PrefixStore("threads", store), rank, n, datetime.timedelta(seconds=60),
                "hash", "torch HashStore")
            t = data(rank, 513, torch.float64)
            pg.allreduce([t]).wait()
            check(t, reference(n, 513, torch.float64, "sum"), "all_reduce over a HashStore")
            pg.shutdown()
        except BaseException as e:  # noqa: B902  (reported below with its rank)
            errors.append(f"rank {rank}: {e!r}")

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if any(t.is_alive() for t in threads):
        raise AssertionError("a thread rank over the HashStore did not finish in 120 s")
    if errors:
        raise AssertionError("; ".join(errors))
    result(ok=True, ranks=n)


if __name__ == "__main__":
    globals()["scenario_" + sys.argv[1]]()
