"""The torch.distributed backend "mscclpp" (mscclpp.torch) on CPU ranks: 2 and 4 processes meet
through a FileStore (no port of their own; the library's bootstrap picks its own), run every
operation through the backend and compare with the same operation through a gloo group of the same
processes. Skipped when torch is not importable."""
import os
import tempfile
import time
import traceback

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import torch.multiprocessing as mp  # noqa: E402

R = dist.ReduceOp
DTYPES = (torch.float32, torch.bfloat16, torch.int64)


def _data(rank, n, dtype, salt=0):
    """Small integers (exact sums and products in every dtype here), different per rank."""
    x = (torch.arange(n, dtype=torch.int64) * 3 + rank * 5 + salt) % 7 - 2
    return x.to(dtype)


def _eq(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), "%s:\n%s\n!=\n%s" % (what, a, b)


def _check_allreduce(rank, n, gl):
    for dt in DTYPES:
        for op in (R.SUM, R.PRODUCT, R.MAX, R.MIN):
            x = _data(rank, 37, dt) if op != R.PRODUCT else (_data(rank, 37, dt) % 2 + 1)
            a, b = x.clone(), x.clone()
            dist.all_reduce(a, op=op)
            dist.all_reduce(b, op=op, group=gl)
            _eq(a, b, "all_reduce %s %s" % (dt, op))
        # AVG (gloo has none): the sum divided by n (integers: truncated, here non-negative sums)
        x = _data(rank, 37, dt) + 2
        a, s = x.clone(), x.clone()
        dist.all_reduce(a, op=R.AVG)
        dist.all_reduce(s, group=gl)
        want = s // n if not dt.is_floating_point else (s.float() / n).to(dt)
        _eq(a, want, "all_reduce %s AVG" % dt)
        # PREMUL_SUM with a per-rank factor, as a float and as a tensor: sum of factor_r * x_r
        if dt.is_floating_point:
            for factor in (float(rank + 1), torch.tensor([0.5 * (rank + 1)])):
                a = x.clone()
                dist.all_reduce(a, op=dist._make_nccl_premul_sum(factor))
                f = factor if isinstance(factor, float) else factor.item()
                b = (x * f).to(dt)
                dist.all_reduce(b, group=gl)
                _eq(a, b, "all_reduce %s PREMUL_SUM %r" % (dt, factor))
    # bitwise ops of integers (an allgather, then the reduction) and bool (or / and)
    for op in (R.BAND, R.BOR, R.BXOR):
        x = torch.tensor([rank + 1, 3 * rank, 255, 1 << rank], dtype=torch.int64)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a, op=op)
        dist.all_reduce(b, op=op, group=gl)
        _eq(a, b, "all_reduce int64 %s" % op)
    x = torch.tensor([True, rank == 0, False, rank % 2 == 1])
    a, b = x.clone(), x.clone()
    dist.all_reduce(a)  # logical or
    _eq(a, torch.tensor([True, True, False, n > 1]), "all_reduce bool")
    dist.all_reduce(b, op=R.MIN)  # logical and
    _eq(b, torch.tensor([True, n == 1, False, False]), "all_reduce bool MIN")
    # a non-contiguous tensor (a transposed view) is reduced in place
    x = _data(rank, 24, torch.float32).view(4, 6).t()
    a, b = x.clone(), x.contiguous().clone()
    dist.all_reduce(x)
    dist.all_reduce(b, group=gl)
    _eq(x.contiguous(), b, "all_reduce non-contiguous")
    del a


def _check_gather_scatter(rank, n, gl):
    for dt in DTYPES:
        x = _data(rank, 5, dt).view(1, 5)
        a = torch.empty(n, 5, dtype=dt)
        b = torch.empty_like(a)
        dist.all_gather_into_tensor(a, x)
        dist.all_gather_into_tensor(b, x, group=gl)
        _eq(a, b, "all_gather_into_tensor %s" % dt)
        la = [torch.empty(1, 5, dtype=dt) for _ in range(n)]
        lb = [torch.empty(1, 5, dtype=dt) for _ in range(n)]
        dist.all_gather(la, x)
        dist.all_gather(lb, x, group=gl)
        for i in range(n):
            _eq(la[i], lb[i], "all_gather %s [%d]" % (dt, i))
        ops = (R.SUM, R.MAX, R.MIN) if dt != torch.int64 else (R.SUM, R.PRODUCT, R.MAX)
        for op in ops:
            big = _data(rank, 6 * n, dt)
            a, b = torch.empty(6, dtype=dt), torch.empty(6, dtype=dt)
            dist.reduce_scatter_tensor(a, big, op=op)
            # gloo's reduce_scatter_tensor: the list form, which gloo has
            dist.reduce_scatter(b, list(big.chunk(n)), op=op, group=gl)
            _eq(a, b, "reduce_scatter_tensor %s %s" % (dt, op))
            c = torch.empty(6, dtype=dt)
            dist.reduce_scatter(c, list(big.chunk(n)), op=op)
            _eq(c, b, "reduce_scatter %s %s" % (dt, op))
        for root in (0, n - 1):
            a, b = _data(rank, 9, dt), _data(rank, 9, dt)
            dist.broadcast(a, src=root)
            dist.broadcast(b, src=root, group=gl)
            _eq(a, b, "broadcast %s root %d" % (dt, root))
            a, b = _data(rank, 9, dt), _data(rank, 9, dt)
            dist.reduce(a, dst=root, op=R.SUM)
            dist.reduce(b, dst=root, op=R.SUM, group=gl)
            if rank == root:
                _eq(a, b, "reduce %s root %d" % (dt, root))
    # reduce_scatter_tensor with AVG (gloo: SUM / n)
    big = _data(rank, 4 * n, torch.float32) + 2
    a, b = torch.empty(4), torch.empty(4)
    dist.reduce_scatter_tensor(a, big, op=R.AVG)
    dist.reduce_scatter(b, list(big.chunk(n)), group=gl)
    _eq(a, b / n, "reduce_scatter_tensor AVG")
    # scatter and gather through grouped send/recv
    root = n - 1
    ins = [torch.full((3,), float(10 * i + rank)) for i in range(n)] if rank == root else None
    a, b = torch.empty(3), torch.empty(3)
    dist.scatter(a, ins, src=root)
    dist.scatter(b, ins, src=root, group=gl)
    _eq(a, b, "scatter")
    outs_a = [torch.empty(3) for _ in range(n)] if rank == 0 else None
    outs_b = [torch.empty(3) for _ in range(n)] if rank == 0 else None
    dist.gather(torch.full((3,), float(rank)), outs_a, dst=0)
    dist.gather(torch.full((3,), float(rank)), outs_b, dst=0, group=gl)
    if rank == 0:
        for i in range(n):
            _eq(outs_a[i], outs_b[i], "gather [%d]" % i)
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank})
    assert objs == [{"rank": i} for i in range(n)], objs


def _check_alltoall(rank, n, gl):
    for dt in DTYPES:
        x = _data(rank, 4 * n, dt).view(2 * n, 2)
        a, b = torch.empty_like(x), torch.empty_like(x)
        dist.all_to_all_single(a, x)
        dist.all_to_all_single(b, x, group=gl)
        _eq(a, b, "all_to_all_single %s" % dt)
    # uneven splits: rank r sends r + p + 1 rows to p (rows of 3 elements)
    ins = [rank + p + 1 for p in range(n)]
    outs = [p + rank + 1 for p in range(n)]
    x = (torch.arange(sum(ins) * 3, dtype=torch.float32) + 100 * rank).view(-1, 3)
    a, b = torch.empty(sum(outs), 3), torch.empty(sum(outs), 3)
    dist.all_to_all_single(a, x, outs, ins)
    dist.all_to_all_single(b, x, outs, ins, group=gl)
    _eq(a, b, "all_to_all_single uneven")
    ins_l = [torch.full((p + 1,), float(rank * 10 + p)) for p in range(n)]
    outs_l = [torch.empty(rank + 1) for _ in range(n)]
    dist.all_to_all(outs_l, ins_l)
    for p in range(n):
        _eq(outs_l[p], torch.full((rank + 1,), float(p * 10 + rank)), "all_to_all [%d]" % p)


def _check_p2p(rank, n, gl):
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    # blocking send/recv: even ranks send first
    x = torch.full((1000,), float(rank))
    y = torch.empty(1000)
    if rank % 2 == 0:
        dist.send(x, nxt)
        dist.recv(y, prv)
    else:
        dist.recv(y, prv)
        dist.send(x, nxt)
    _eq(y, torch.full((1000,), float(prv)), "send/recv")
    # isend/irecv in any order, large enough to need the group (several chunks of 16 MiB scratch)
    x = torch.arange(3 << 20, dtype=torch.float32) + rank
    y = torch.empty_like(x)
    reqs = [dist.isend(x, nxt), dist.irecv(y, prv)]
    assert reqs[1].get_future().wait()[0] is y
    for r in reqs:
        r.wait()
    _eq(y, torch.arange(3 << 20, dtype=torch.float32) + prv, "isend/irecv")
    # batch_isend_irecv ring in both directions, bfloat16
    a = _data(rank, 11, torch.bfloat16)
    fa, fb = torch.empty_like(a), torch.empty_like(a)
    ops = [dist.P2POp(dist.isend, a, nxt), dist.P2POp(dist.isend, a, prv), dist.P2POp(dist.irecv, fa, prv),
           dist.P2POp(dist.irecv, fb, nxt)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    _eq(fa, _data(prv, 11, torch.bfloat16), "batch_isend_irecv from prev")
    _eq(fb, _data(nxt, 11, torch.bfloat16), "batch_isend_irecv from next")
    # a queued isend runs before the next collective of the group
    req = dist.isend(torch.full((4,), float(rank)), nxt)
    z = torch.empty(4)
    dist.recv(z, prv)
    s = torch.ones(1)
    dist.all_reduce(s)
    req.wait()
    _eq(z, torch.full((4,), float(prv)), "isend + recv")
    _eq(s, torch.full((1,), float(n)), "all_reduce after isend")
    with pytest.raises(NotImplementedError, match="recv_anysource|any source"):
        dist.recv(torch.empty(1))


def _check_fallback(rank, n, gl):
    # int16 has no mscclpp DataType: NotImplementedError naming it; with MSCCLPP_TORCH_FALLBACK=gloo
    # the call goes to a gloo backend made on the group's store (gloo has no int16 reductions either:
    # its own error shows the forwarding), and other calls still run natively
    x = torch.arange(10, dtype=torch.int16) + rank
    with pytest.raises(NotImplementedError, match="int16"):
        dist.all_reduce(x.clone())
    os.environ["MSCCLPP_TORCH_FALLBACK"] = "gloo"
    try:
        with pytest.raises(RuntimeError, match="Invalid scalar type"):
            dist.all_reduce(x.clone())
        pg = dist.group.WORLD
        assert isinstance(pg._fallback_pg, dist.ProcessGroupGloo)
        # the fallback group works: a bitwise op through it directly
        a, b = x.to(torch.int32), x.to(torch.int32)
        o = dist.AllreduceOptions()
        o.reduceOp = R.BOR
        pg._fallback_pg.allreduce([a], o).wait()
        dist.all_reduce(b, op=R.BOR)
        _eq(a, b, "BOR: gloo fallback group vs mscclpp")
    finally:
        del os.environ["MSCCLPP_TORCH_FALLBACK"]
    # data movement does not care about the dtype
    y = torch.empty(n * 10, dtype=torch.int16)
    dist.all_gather_into_tensor(y, x)
    _eq(y, torch.cat([torch.arange(10, dtype=torch.int16) + r for r in range(n)]), "all_gather int16")


def _check_async(rank, n, gl):
    x = torch.full((64,), float(rank + 1))
    w = dist.all_reduce(x, async_op=True)
    assert w.wait() is True and w.is_completed()
    _eq(x, torch.full((64,), float(n * (n + 1) // 2)), "async all_reduce")
    fut = dist.all_reduce(x, async_op=True).get_future()
    (v,) = fut.wait()
    _eq(v, torch.full((64,), float(n * n * (n + 1) // 2)), "future of all_reduce")
    out = torch.empty(n * 2)
    w = dist.all_gather_into_tensor(out, torch.full((2,), float(rank)), async_op=True)
    w.wait()
    _eq(out, torch.arange(n).float().repeat_interleave(2), "async all_gather_into_tensor")
    dist.barrier()
    dist.barrier(async_op=True).wait()


def _check_groups(rank, n, gl):
    import mscclpp.torch

    ranks = [0, n - 1]
    sub = dist.new_group(ranks)  # the default backend: mscclpp
    subg = dist.new_group(ranks, backend="gloo")
    assert (sub == dist.GroupMember.NON_GROUP_MEMBER) == (rank not in ranks)
    if rank in ranks:
        assert dist.get_backend(sub) == "mscclpp" and sub.size() == 2
        a = _data(rank, 10, torch.float32)
        b = a.clone()
        dist.all_reduce(a, group=sub)
        dist.all_reduce(b, group=subg)
        _eq(a, b, "new_group all_reduce")
        c = _data(rank, 10, torch.int64)
        dist.broadcast(c, src=n - 1, group=sub)  # a global rank, translated by torch
        _eq(c, _data(n - 1, 10, torch.int64), "new_group broadcast")
    # split into halves (every rank in one part): a communicator per part through the library
    half = [list(range(0, n // 2)), list(range(n // 2, n))] if n > 1 else [[0]]
    part = mscclpp.torch.split_group(half)
    mine = next(p for p in half if rank in p)
    assert part is not None and part.size() == len(mine) and dist.get_process_group_ranks(part) == mine
    x = torch.full((5,), float(rank))
    dist.all_reduce(x, group=part)
    _eq(x, torch.full((5,), float(sum(mine))), "split_group all_reduce")
    y = torch.empty(len(mine))
    dist.all_gather_into_tensor(y, torch.full((1,), float(rank)), group=part)
    _eq(y, torch.tensor([float(r) for r in mine]), "split_group all_gather")


def _check_ddp(rank, n, gl):
    from torch.nn.parallel import DistributedDataParallel as DDP

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    results = []
    for group in (None, gl):
        m = DDP(model(), process_group=group)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(100 + rank)
        for _ in range(3):
            x, y = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
            opt.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
        results.append([p.detach().clone() for p in m.parameters()])
    for p, q in zip(*results):
        assert torch.allclose(p, q, rtol=1e-6, atol=1e-7), (p - q).abs().max()


CHECKS = (_check_allreduce, _check_gather_scatter, _check_alltoall, _check_p2p, _check_fallback, _check_async,
          _check_groups, _check_ddp)


def _worker(rank, n, path, q):
    err = None
    try:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        import mscclpp.torch  # noqa: F401  registers the backend

        torch.set_num_threads(1)
        dist.init_process_group("mscclpp", init_method="file://" + path, rank=rank, world_size=n)
        assert dist.get_backend() == "mscclpp"
        gl = dist.new_group(backend="gloo")
        for check in CHECKS:
            t0 = time.perf_counter()
            check(rank, n, gl)
            if os.environ.get("MSCCLPP_TORCH_TEST_VERBOSE") and rank == 0:
                print("%d ranks: %s %.2f s" % (n, check.__name__, time.perf_counter() - t0), flush=True)
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # noqa: B036 - report everything to the parent
        err = traceback.format_exc()
    q.put((rank, err))


@pytest.mark.parametrize("n", [2, 4])
def test_torch_backend(n):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "store")
        procs = [ctx.Process(target=_worker, args=(r, n, path, q)) for r in range(n)]
        for p in procs:
            p.start()
        try:
            results = dict(q.get(timeout=150) for _ in procs)
        finally:
            for p in procs:
                p.join(30)
                if p.is_alive():
                    p.kill()
    bad = {r: e for r, e in results.items() if e}
    assert not bad, "\n".join("rank %d:\n%s" % kv for kv in sorted(bad.items()))


def test_import_mscclpp_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, mscclpp; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
