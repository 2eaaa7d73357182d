"""torch.distributed's NCCL backend on libmscclpp_nccl.so, every result checked against values
computed here. Run on a GPU machine, one process per GPU:

    LD_PRELOAD=build/lib/libmscclpp_nccl.so torchrun --nproc_per_node N tests/nccl/torch_nccl.py

(the preloaded library's soname is libnccl.so.2, so it stands for the NCCL torch would load).
TORCH_NCCL_XHOSTS=H makes the ranks H stand-in hosts (rank r on host r*H/N: MSCCLPP_HOSTID for
this library, NCCL_HOSTID for NCCL), so every operation crosses hosts.
Without LD_PRELOAD the same script checks torch's own NCCL. Prints one line per operation and
"torch_nccl: all N checks passed" from rank 0 (TORCH_NCCL_VERBOSE=1: each check as it passes);
exits 1 on the first wrong result."""
import ctypes
import os
import sys

import torch
import torch.distributed as dist


def check(name, got, want):
    if not torch.equal(got, want):
        bad = (got != want).sum().item()
        print("rank %d: %s: %d wrong elements (got %s, want %s)" % (dist.get_rank(), name, bad,
              got.flatten()[:4].tolist(), want.flatten()[:4].tolist()), flush=True)
        sys.exit(1)
    if os.environ.get("TORCH_NCCL_VERBOSE") and dist.get_rank() == 0:
        print("ok: " + name, flush=True)


def library():
    """The NCCL the process uses, as ncclGetVersion reports it (22707: this library's nccl.h)."""
    v = ctypes.c_int()
    lib = ctypes.CDLL("libnccl.so.2")
    lib.ncclGetVersion(ctypes.byref(v))
    return v.value


def stand_in_host():
    """TORCH_NCCL_XHOSTS=H: this rank's host id (set before the communicators are made)."""
    hosts = int(os.environ.get("TORCH_NCCL_XHOSTS", "0"))
    if hosts > 0:
        host = "xh%d" % (int(os.environ["RANK"]) * hosts // int(os.environ["WORLD_SIZE"]))
        os.environ["MSCCLPP_HOSTID"] = os.environ["NCCL_HOSTID"] = host


def main():
    stand_in_host()
    dist.init_process_group("nccl")
    r, n = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", r)))
    torch.cuda.set_device(dev)
    checks = 0

    def x(shape, dtype=torch.float32, of=None):
        k = r if of is None else of
        return (torch.arange(shape, device=dev, dtype=torch.float64) % 7 + 3 * (k + 1)).to(dtype)

    for op, fold in ((dist.ReduceOp.SUM, lambda a, b: a + b), (dist.ReduceOp.PRODUCT, lambda a, b: a * b),
                     (dist.ReduceOp.MIN, torch.minimum), (dist.ReduceOp.MAX, torch.maximum)):
        for dtype in (torch.float32, torch.bfloat16, torch.int32):
            t = x(1000, dtype) if op != dist.ReduceOp.PRODUCT else (x(1000, dtype) % 3 + 1)
            want = None
            for k in range(n):
                v = x(1000, dtype, k) if op != dist.ReduceOp.PRODUCT else (x(1000, dtype, k) % 3 + 1)
                want = v if want is None else fold(want, v)
            dist.all_reduce(t, op=op)
            check("all_reduce %s %s" % (op, dtype), t, want)
            checks += 1
    t = x(4096) * n
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check("all_reduce avg", t, sum(x(4096, of=k) for k in range(n)))
    checks += 1

    out = torch.empty(n * 777, device=dev)
    dist.all_gather_into_tensor(out, x(777))
    check("all_gather_into_tensor", out, torch.cat([x(777, of=k) for k in range(n)]))
    rs = torch.empty(555, device=dev)
    dist.reduce_scatter_tensor(rs, x(555 * n))
    check("reduce_scatter_tensor", rs, sum(x(555 * n, of=k) for k in range(n))[r * 555:(r + 1) * 555])
    b = x(300)
    dist.broadcast(b, src=n - 1)
    check("broadcast", b, x(300, of=n - 1))
    red = x(300)
    dist.reduce(red, dst=0)
    if r == 0:
        check("reduce", red, sum(x(300, of=k) for k in range(n)))
    checks += 4

    # all_to_all_single with uneven splits: rank r sends k + 1 elements to rank k
    send = torch.cat([torch.full((k + 1,), float(100 * r + k), device=dev) for k in range(n)])
    recv = torch.empty(n * (r + 1), device=dev)
    dist.all_to_all_single(recv, send, output_split_sizes=[r + 1] * n, input_split_sizes=[k + 1 for k in range(n)])
    check("all_to_all_single uneven", recv, torch.cat([torch.full((r + 1,), float(100 * k + r), device=dev)
                                                       for k in range(n)]))
    checks += 1

    nxt, prv = (r + 1) % n, (r - 1) % n
    got = torch.empty(1000, device=dev)
    ops = [dist.P2POp(dist.isend, x(1000), nxt), dist.P2POp(dist.irecv, got, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    check("batch_isend_irecv", got, x(1000, of=prv))
    if n >= 2:
        if r == 0:
            dist.send(x(64), 1)
        elif r == 1:
            g1 = torch.empty(64, device=dev)
            dist.recv(g1, 0)
            check("send/recv", g1, x(64, of=0))
    dist.barrier()
    checks += 2

    evens = dist.new_group([k for k in range(n) if k % 2 == 0])
    if r % 2 == 0:
        e = x(128)
        dist.all_reduce(e, group=evens)
        check("new_group all_reduce", e, sum(x(128, of=k) for k in range(0, n, 2)))
    checks += 1

    # a CUDA graph: capture one all_reduce, replay with new inputs
    s = torch.cuda.Stream()
    g_in = x(2048)
    with torch.cuda.stream(s):
        dist.all_reduce(g_in)  # warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        dist.all_reduce(g_in)
    for rep in range(3):
        g_in.copy_(x(2048) * (rep + 2))
        graph.replay()
        torch.cuda.synchronize()
        check("all_reduce in a CUDA graph, replay %d" % rep, g_in, sum(x(2048, of=k) for k in range(n)) * (rep + 2))
    checks += 1

    dist.destroy_process_group()
    if r == 0:
        print("torch_nccl: all %d checks passed (ncclGetVersion %d, %d ranks)" % (checks, library(), n), flush=True)


if __name__ == "__main__":
    main()
