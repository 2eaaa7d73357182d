"""GPU check of the torch.distributed backend "mscclpp" (mscclpp.torch), against NCCL in the same
processes:

    NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node N python/tests/gpu_torch_backend_check.py

Every operation on CUDA tensors compared with an NCCL group's result (exact: small integers), the
stream semantics of async work (the side stream waits for the caller's stream, wait() orders the
caller's stream after it, also on a non-default stream), CPU tensors through the same group on a GPU
machine, a CUDA-graph capture of all_reduce replayed with new data, DDP against DDP over NCCL, and a
few timings. Prints one line per check on rank 0 and exits 1 if any rank failed.
TORCH_XHOSTS=H makes the ranks H stand-in hosts (rank r on host r*H/N: MSCCLPP_HOSTID for
mscclpp, NCCL_HOSTID for the NCCL group), so every operation of both crosses hosts."""
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

import mscclpp.torch  # noqa: F401  registers the backend

R = dist.ReduceOp
FAILS = []


def data(rank, n, dtype, dev, salt=0):
    x = (torch.arange(n, dtype=torch.int64, device=dev) * 3 + rank * 5 + salt) % 7 - 2
    return x.to(dtype)


def eq(a, b, what):
    if not (a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)):
        raise AssertionError("%s: mscclpp %s != nccl %s" % (what, a.flatten()[:8].tolist(), b.flatten()[:8].tolist()))


def check(name):
    def deco(fn):
        def run(*args):
            t0 = time.perf_counter()
            try:
                fn(*args)
                torch.cuda.synchronize()
                ok = "ok"
            except Exception:
                ok = "FAILED\n" + traceback.format_exc()
                FAILS.append(name)
            if dist.get_rank() == 0 or ok != "ok":
                print("[rank %d] %-28s %s (%.2f s)" % (dist.get_rank(), name, ok, time.perf_counter() - t0), flush=True)
        run.__name__ = name
        return run
    return deco


@check("all_reduce")
def c_allreduce(rank, n, dev, nc):
    for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int64):
        for op in (R.SUM, R.PRODUCT, R.MAX, R.MIN, R.AVG):
            if op == R.AVG and not dt.is_floating_point:
                continue
            for count in (37, 1 << 20):
                x = data(rank, count, dt, dev) if op != R.PRODUCT else data(rank, count, dt, dev) % 2 + 1
                a, b = x.clone(), x.clone()
                dist.all_reduce(a, op=op)
                dist.all_reduce(b, op=op, group=nc)
                eq(a, b, "all_reduce %s %s %d" % (dt, op, count))
        if dt.is_floating_point:
            # premul sum: against NCCL's sum of the scaled inputs (NCCL's own premul sum through
            # torch 2.11 returned zeros for bfloat16 on H100, so it is not the reference)
            for factor in (float(rank + 1), torch.tensor([0.5 * (rank + 1)], device=dev)):
                x = data(rank, 1000, dt, dev)
                a = x.clone()
                dist.all_reduce(a, op=dist._make_nccl_premul_sum(factor))
                b = (x * (factor if isinstance(factor, float) else factor.item())).to(dt)
                dist.all_reduce(b, group=nc)
                eq(a, b, "all_reduce %s premul %r" % (dt, factor))
    x = torch.tensor([True, rank == 0, False], device=dev)
    dist.all_reduce(x)
    eq(x, torch.tensor([True, True, False], device=dev), "all_reduce bool")
    x = data(rank, 24, torch.float32, dev).view(4, 6).t()
    b = x.contiguous()
    dist.all_reduce(x)
    dist.all_reduce(b, group=nc)
    eq(x.contiguous(), b, "all_reduce non-contiguous")


@check("gather/scatter family")
def c_gather(rank, n, dev, nc):
    for dt in (torch.float32, torch.bfloat16, torch.int64):
        x = data(rank, 5000, dt, dev)
        a, b = torch.empty(n * 5000, dtype=dt, device=dev), torch.empty(n * 5000, dtype=dt, device=dev)
        dist.all_gather_into_tensor(a, x)
        dist.all_gather_into_tensor(b, x, group=nc)
        eq(a, b, "all_gather_into_tensor %s" % dt)
        la = [torch.empty_like(x) for _ in range(n)]
        lb = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(la, x)
        dist.all_gather(lb, x, group=nc)
        for i in range(n):
            eq(la[i], lb[i], "all_gather %s" % dt)
        big = data(rank, 6000 * n, dt, dev)
        for op in (R.SUM, R.MAX) + ((R.AVG,) if dt.is_floating_point else ()):
            a, b = torch.empty(6000, dtype=dt, device=dev), torch.empty(6000, dtype=dt, device=dev)
            dist.reduce_scatter_tensor(a, big, op=op)
            dist.reduce_scatter_tensor(b, big, op=op, group=nc)
            eq(a, b, "reduce_scatter_tensor %s %s" % (dt, op))
            c = torch.empty(6000, dtype=dt, device=dev)
            dist.reduce_scatter(c, list(big.chunk(n)), op=op)
            eq(c, b, "reduce_scatter %s %s" % (dt, op))
        for root in (0, n - 1):
            a, b = data(rank, 999, dt, dev), data(rank, 999, dt, dev)
            dist.broadcast(a, src=root)
            dist.broadcast(b, src=root, group=nc)
            eq(a, b, "broadcast %s" % dt)
            a, b = data(rank, 999, dt, dev), data(rank, 999, dt, dev)
            dist.reduce(a, dst=root)
            dist.reduce(b, dst=root, group=nc)
            if rank == root:
                eq(a, b, "reduce %s" % dt)
    root = n - 1
    ins = [torch.full((300,), float(10 * i + rank), device=dev) for i in range(n)] if rank == root else None
    a, b = torch.empty(300, device=dev), torch.empty(300, device=dev)
    dist.scatter(a, ins, src=root)
    dist.scatter(b, ins, src=root, group=nc)
    eq(a, b, "scatter")
    outs = [torch.empty(300, device=dev) for _ in range(n)] if rank == 0 else None
    dist.gather(torch.full((300,), float(rank), device=dev), outs, dst=0)
    if rank == 0:
        for i in range(n):
            eq(outs[i], torch.full((300,), float(i), device=dev), "gather")
    objs = [None] * n
    dist.all_gather_object(objs, rank)
    assert objs == list(range(n)), objs


@check("all_to_all")
def c_alltoall(rank, n, dev, nc):
    x = data(rank, 4096 * n, torch.float32, dev)
    a, b = torch.empty_like(x), torch.empty_like(x)
    dist.all_to_all_single(a, x)
    dist.all_to_all_single(b, x, group=nc)
    eq(a, b, "all_to_all_single")
    ins, outs = [rank + p + 1 for p in range(n)], [p + rank + 1 for p in range(n)]
    x = (torch.arange(sum(ins) * 3, dtype=torch.float32, device=dev) + 100 * rank).view(-1, 3)
    a, b = torch.empty(sum(outs), 3, device=dev), torch.empty(sum(outs), 3, device=dev)
    dist.all_to_all_single(a, x, outs, ins)
    dist.all_to_all_single(b, x, outs, ins, group=nc)
    eq(a, b, "all_to_all_single uneven")
    li = [torch.full((p + 1,), float(rank * 10 + p), device=dev) for p in range(n)]
    lo = [torch.empty(rank + 1, device=dev) for _ in range(n)]
    dist.all_to_all(lo, li)
    for p in range(n):
        eq(lo[p], torch.full((rank + 1,), float(p * 10 + rank), device=dev), "all_to_all")


@check("send/recv")
def c_p2p(rank, n, dev, nc):
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    x, y = torch.full((1 << 20,), float(rank), device=dev), torch.empty(1 << 20, device=dev)
    if rank % 2 == 0:
        dist.send(x, nxt)
        dist.recv(y, prv)
    else:
        dist.recv(y, prv)
        dist.send(x, nxt)
    eq(y, torch.full((1 << 20,), float(prv), device=dev), "send/recv")
    a = data(rank, 1 << 22, torch.bfloat16, dev)
    fa, fb = torch.empty_like(a), torch.empty_like(a)
    ops = [dist.P2POp(dist.isend, a, nxt), dist.P2POp(dist.isend, a, prv), dist.P2POp(dist.irecv, fa, prv),
           dist.P2POp(dist.irecv, fb, nxt)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    eq(fa, data(prv, 1 << 22, torch.bfloat16, dev), "batch_isend_irecv prev")
    eq(fb, data(nxt, 1 << 22, torch.bfloat16, dev), "batch_isend_irecv next")


@check("async stream order")
def c_async(rank, n, dev, nc):
    s1 = torch.cuda.Stream(dev)
    for stream in (torch.cuda.current_stream(dev), s1):
        with torch.cuda.stream(stream):
            x = torch.zeros(1 << 22, device=dev)
            torch.cuda._sleep(50_000_000)  # the fill below lands late: the side stream must wait for it
            x.fill_(rank + 1)
            w = dist.all_reduce(x, async_op=True)
            w.wait()  # the current stream waits for the side stream
            y = x * 2
            eq(y, torch.full_like(x, float(n * (n + 1))), "async all_reduce then use")
            fut = dist.all_reduce(x, async_op=True).get_future()
            eq(fut.wait()[0], torch.full_like(x, float(n * n * (n + 1) // 2)), "future")
    torch.cuda.synchronize()
    w = dist.all_reduce(torch.ones(10, device=dev), async_op=True)
    torch.cuda.synchronize()
    assert w.is_completed()
    # Calls issued on two streams with nothing ordering them (FSDP2's all-gather and reduce-scatter
    # streams; an async call left unwaited, then a synchronous one): the group must still run them
    # one after another, as their kernels share the communicator's buffers.
    s2 = torch.cuda.Stream(dev)
    a, b, c = (torch.full((1 << 22,), float(rank + 1), device=dev) for _ in range(3))
    g_in = torch.full((1 << 20,), float(rank), device=dev)
    g_out = torch.empty((1 << 20) * n, device=dev)
    torch.cuda.synchronize()
    with torch.cuda.stream(s1):
        torch.cuda._sleep(20_000_000)  # the first call starts late: the second must wait for it
        dist.all_reduce(a)
    with torch.cuda.stream(s2):
        dist.all_gather_into_tensor(g_out, g_in)
        w = dist.all_reduce(b, async_op=True)
    dist.all_reduce(c)  # current stream, while w has not been waited for
    w.wait()
    torch.cuda.synchronize()
    want = torch.full_like(a, float(n * (n + 1) // 2))
    eq(a, want, "sync all_reduce on stream 1")
    eq(b, want, "async all_reduce on stream 2")
    eq(c, want, "sync all_reduce on the current stream after an unwaited async one")
    eq(g_out, torch.arange(n, device=dev, dtype=torch.float32).repeat_interleave(1 << 20), "all_gather on stream 2")
    dist.barrier()


@check("cpu tensors on a gpu machine")
def c_cpu(rank, n, dev, nc):
    x = torch.full((100,), float(rank))
    dist.all_reduce(x)
    eq(x, torch.full((100,), float(n * (n - 1) // 2)), "cpu all_reduce")
    y = torch.empty(n)
    dist.all_gather_into_tensor(y, torch.full((1,), float(rank)))
    eq(y, torch.arange(n, dtype=torch.float32), "cpu all_gather")


@check("cuda graph all_reduce")
def c_graph(rank, n, dev, nc):
    x = torch.zeros(1 << 16, device=dev)
    s = torch.cuda.Stream(dev)
    s.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(s):  # warm up outside capture
        dist.all_reduce(x)
    torch.cuda.current_stream(dev).wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        dist.all_reduce(x)
        x.mul_(2)
    for it in range(3):
        x.copy_(data(rank, 1 << 16, torch.float32, dev, salt=it))
        g.replay()
        want = sum(data(r, 1 << 16, torch.float32, dev, salt=it) for r in range(n)) * 2
        eq(x, want, "graph replay %d" % it)


@check("new_group / split_group")
def c_groups(rank, n, dev, nc):
    ranks = [0, n - 1]
    sub = dist.new_group(ranks)
    if rank in ranks:
        a = data(rank, 1000, torch.float32, dev)
        dist.all_reduce(a, group=sub)
        eq(a, data(0, 1000, torch.float32, dev) + data(n - 1, 1000, torch.float32, dev), "new_group")
    half = [list(range(0, n // 2)), list(range(n // 2, n))] if n > 1 else [[0]]
    part = mscclpp.torch.split_group(half)
    mine = next(p for p in half if rank in p)
    x = torch.full((77,), float(rank), device=dev)
    dist.all_reduce(x, group=part)
    eq(x, torch.full((77,), float(sum(mine)), device=dev), "split_group")


@check("DDP vs NCCL")
def c_ddp(rank, n, dev, nc):
    from torch.nn.parallel import DistributedDataParallel as DDP

    out = []
    for group in (None, nc):
        torch.manual_seed(0)
        m = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(dev),
                device_ids=[dev.index], process_group=group)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        g = torch.Generator(device=dev).manual_seed(100 + rank)
        for _ in range(3):
            x = torch.randn(6, 8, device=dev, generator=g)
            opt.zero_grad()
            m(x).square().mean().backward()
            opt.step()
        out.append([p.detach().clone() for p in m.parameters()])
    for p, q in zip(*out):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), (p - q).abs().max().item()


def timing(rank, n, dev, nc):
    """Eager all_reduce through dist (mscclpp, NCCL) and the library's call alone on the current
    stream (what the backend adds is the difference), 20 calls back to back, and the host time of
    one dist.all_reduce call of the backend (no synchronization)."""
    from mscclpp import _mscclpp

    pg = dist.group.WORLD
    for nbytes in (1 << 10, 1 << 20, 1 << 26):
        x = torch.ones(nbytes // 4, device=dev)
        comm = pg._gpu[1]
        stream = torch.cuda.current_stream(dev).cuda_stream
        runs = (("mscclpp", lambda: dist.all_reduce(x)), ("nccl", lambda: dist.all_reduce(x, group=nc)),
                ("library", lambda: _mscclpp._torch_coll(0, comm, x.data_ptr(), x.data_ptr(), x.numel(), 7, 0, 0,
                                                         stream)))
        res = []
        for _, fn in runs:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            dist.barrier(group=nc)  # every rank starts together: no skew in the per-call time
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
            res.append((time.perf_counter() - t0) / 20 * 1e6)
        host = []
        for _, fn in runs:
            t0 = time.perf_counter()
            fn()
            host.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
        if rank == 0:
            print("all_reduce %9d B: mscclpp %7.1f us, nccl %7.1f us, library alone %7.1f us (20 calls); host time "
                  "of one call: %5.1f / %5.1f / %5.1f us" % (nbytes, *res, *host), flush=True)
    if os.environ.get("PROFILE") and rank == 0:
        import cProfile
        import pstats

        x = torch.ones(256, device=dev)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(200):
            dist.all_reduce(x, group=pg)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(14)
    elif os.environ.get("PROFILE"):
        for _ in range(200):
            dist.all_reduce(torch.ones(256, device=dev))
    torch.cuda.synchronize()


def stand_in_host():
    """TORCH_XHOSTS=H: this rank's host id, set before any communicator is made."""
    hosts = int(os.environ.get("TORCH_XHOSTS", "0"))
    if hosts > 0:
        host = "xh%d" % (int(os.environ["RANK"]) * hosts // int(os.environ["WORLD_SIZE"]))
        os.environ["MSCCLPP_HOSTID"] = os.environ["NCCL_HOSTID"] = host


def main():
    stand_in_host()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    # device_id binds the default group to this GPU (as recent torch code does); new_group inherits it
    dist.init_process_group("mscclpp", device_id=dev)
    rank, n = dist.get_rank(), dist.get_world_size()
    nc = dist.new_group(backend="nccl")
    for c in (c_allreduce, c_gather, c_alltoall, c_p2p, c_async, c_cpu, c_graph, c_groups, c_ddp):
        c(rank, n, dev, nc)
    timing(rank, n, dev, nc)
    bad = torch.tensor([len(FAILS)], device=dev)
    dist.all_reduce(bad, group=nc)
    if rank == 0:
        print("RESULT %s on %d ranks (%s)" % ("OK" if bad.item() == 0 else "FAILED", n, torch.cuda.get_device_name()))
    dist.destroy_process_group()
    sys.exit(1 if bad.item() else 0)


if __name__ == "__main__":
    main()
