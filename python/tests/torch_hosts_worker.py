"""One rank of test_torch_hosts.py, started by torchrun on each of 2 "hosts" (network namespaces):
the torch.distributed backend "mscclpp" on CPU tensors, every result compared with exact expected
values (small integers: exact in float32), then a short DDP run whose losses must equal gloo's.
Prints "rank R: ok" at the end; any failed check raises (torchrun then exits non-zero)."""
import torch
import torch.distributed as dist

import mscclpp.torch  # noqa: F401  registers the backend

K = 1000  # elements per rank and block


def _eq(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), \
        "%s:\n%s\n!=\n%s" % (what, got, want)


def check_reductions(rank, n):
    i = torch.arange(K, dtype=torch.int64)
    for dt in (torch.float32, torch.int64):
        x = ((i % 13) * (rank + 1)).to(dt)
        dist.all_reduce(x)  # sum over ranks of (r + 1)
        _eq(x, ((i % 13) * (n * (n + 1) // 2)).to(dt), "all_reduce sum %s" % dt)
    x = torch.full((K,), 2.0 * rank)
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    _eq(x, torch.full((K,), float(n - 1)), "all_reduce avg")
    # reduce_scatter: rank q's input block p is q*1e4 + p*K + i; rank r gets block r summed
    x = (torch.arange(n * K, dtype=torch.int64) + rank * 10000).float()
    y = torch.empty(K)
    dist.reduce_scatter_tensor(y, x)
    _eq(y, (10000 * (n * (n - 1) // 2) + n * (rank * K + i)).float(), "reduce_scatter_tensor")


def check_data(rank, n):
    i = torch.arange(K, dtype=torch.int64)
    out = torch.empty(n * K, dtype=torch.int64)
    dist.all_gather_into_tensor(out, i + rank * K)
    _eq(out, torch.arange(n * K, dtype=torch.int64), "all_gather_into_tensor")
    for root in (0, n - 1):  # a root on each host
        x = (i * 7 + root).float() if rank == root else torch.zeros(K)
        dist.broadcast(x, src=root)
        _eq(x, (i * 7 + root).float(), "broadcast from %d" % root)
    # all_to_all_single: rank q sends block p = q*100 + p*10 + j to p
    blk = torch.arange(10, dtype=torch.int64)
    x = torch.cat([rank * 100 + p * 10 + blk for p in range(n)])
    y = torch.empty_like(x)
    dist.all_to_all_single(y, x)
    _eq(y, torch.cat([q * 100 + rank * 10 + blk for q in range(n)]), "all_to_all_single")


def check_p2p(rank, n):
    peer = (rank + n // 2) % n  # the same local rank on the other host
    x, y = torch.full((K,), float(rank)), torch.empty(K)
    if rank < peer:
        dist.send(x, peer)
        dist.recv(y, peer)
    else:
        dist.recv(y, peer)
        dist.send(x, peer)
    _eq(y, torch.full((K,), float(peer)), "send/recv across hosts")
    big = torch.arange(1 << 20, dtype=torch.float32) + rank  # several MiB, non-blocking
    got = torch.empty_like(big)
    for req in (dist.isend(big, peer), dist.irecv(got, peer)):
        req.wait()
    _eq(got, torch.arange(1 << 20, dtype=torch.float32) + peer, "isend/irecv across hosts")
    dist.barrier()


def check_ddp(rank, gloo):
    """3 SGD steps of an MLP under DDP through mscclpp, then through gloo: the same losses."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    losses = []
    for group in (None, gloo):
        torch.manual_seed(0)
        m = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)),
                process_group=group)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(100 + rank)
        run = []
        for _ in range(3):
            x, y = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(torch.tensor(run))
    assert torch.allclose(losses[0], losses[1], rtol=1e-6, atol=1e-7), "DDP losses %s != gloo's %s" % tuple(losses)
    return losses[0]


def main():
    torch.set_num_threads(1)
    dist.init_process_group("mscclpp")  # env:// from torchrun (across hosts)
    assert dist.get_backend() == "mscclpp"
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    check_reductions(rank, n)
    check_data(rank, n)
    check_p2p(rank, n)
    losses = check_ddp(rank, gloo)
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d: ok, DDP losses %s" % (rank, losses.tolist()), flush=True)


if __name__ == "__main__":
    main()
