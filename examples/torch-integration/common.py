"""What the three torch-integration examples share: process setup under torchrun (the MSCCL++
communicator and torch.distributed's NCCL process group, the reference every result is checked
against), result comparison, and the timing table.

On a machine without a GPU (or with MSCCLPP_EXAMPLE_DEVICE=cpu) the same programs run on CPU
ranks: tensors in host memory, gloo as the reference, wall-clock timing; CI runs them that way.

Not an example of its own: each example imports it from its own folder (torchrun puts the script's
folder first on sys.path)."""
import os
import time

import torch
import torch.distributed as dist

import mscclpp

# Element types every example checks, and the tolerance (rtol, atol) of each against NCCL. The
# inputs are small integers, so sums, products, max and min are exact in every type and must match
# bit for bit; avg may round differently (NCCL scales before summing, MSCCL++ divides the sum).
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
TOLERANCE = {torch.float32: (1e-6, 1e-6), torch.bfloat16: (3e-2, 3e-2), torch.float16: (2e-3, 2e-3)}
WARMUP, ITERS = 5, 20
DEVICE = os.environ.get("MSCCLPP_EXAMPLE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
REFERENCE = "nccl" if DEVICE == "cuda" else "gloo"


def sync():
    """Waits for this rank's GPU work (nothing to wait for on CPU ranks)."""
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def stream_handle(stream=None) -> int:
    """The cudaStream_t (as an int) the library enqueues on: stream's, else the current one; 0 on
    CPU ranks."""
    if DEVICE != "cuda":
        return 0
    return (stream or torch.cuda.current_stream()).cuda_stream


def mscclpp_comm(rank: int, world: int) -> "mscclpp.CommGroup":
    """The MSCCL++ communicator of these ranks.

    Seed 001's way when MSCCLPP_MASTER_PORT is set: rank 0's bootstrap root listens on
    MSCCLPP_MASTER_ADDR (else MASTER_ADDR) at that port. Otherwise no port is chosen at all: rank 0
    makes a unique id (its root on a free port, a random secret) and torch.distributed's group
    broadcasts it (a fixed port such as MASTER_PORT + 1 can already be taken, even by another rank's
    listener on this host)."""
    port = os.environ.get("MSCCLPP_MASTER_PORT")
    if port:
        host = os.environ.get("MSCCLPP_MASTER_ADDR") or os.environ.get("MASTER_ADDR") or "127.0.0.1"
        return mscclpp.CommGroup(interfaceIpPortTrio="%s:%s" % (host, port), rank=rank, size=world)
    box = [mscclpp.get_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return mscclpp.CommGroup(unique_id=box[0], rank=rank, size=world)


def setup():
    """One process per GPU under torchrun: selects LOCAL_RANK's GPU, starts torch.distributed's NCCL
    group (the reference) and returns (rank, world size, mscclpp.CommGroup)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if DEVICE == "cuda":
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    else:
        dist.init_process_group("gloo")
    return rank, world, mscclpp_comm(rank, world)


def teardown(comm, failures: int, name: str) -> int:
    """Agrees on the total failure count, prints rank 0's verdict, closes both groups; returns the
    exit status (0: every check passed on every rank)."""
    total = torch.tensor([failures], dtype=torch.int64, device=DEVICE)
    dist.all_reduce(total)
    total = int(total.item())
    if dist.get_rank() == 0:
        print("%s: %s (%d ranks)" % (name, "OK" if total == 0 else "FAILED, %d checks wrong" % total,
                                    dist.get_world_size()), flush=True)
    comm.barrier()
    comm.close()
    dist.destroy_process_group()
    return 0 if total == 0 else 1


def make_input(count: int, dtype: torch.dtype, seed: int, low: int = -8, high: int = 9) -> torch.Tensor:
    """count small integers in [low, high) on this rank's GPU, different per rank and per seed."""
    gen = torch.Generator().manual_seed(seed * 1009 + dist.get_rank())
    return torch.randint(low, high, (count,), generator=gen).to(dtype).to(DEVICE)


def prod_input(count: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Factors from {-2, -1, 1, 2}: a product over up to 8 ranks stays exact in every dtype."""
    values = torch.tensor([-2.0, -1.0, 1.0, 2.0])
    gen = torch.Generator().manual_seed(seed * 1009 + dist.get_rank())
    return values[torch.randint(0, 4, (count,), generator=gen)].to(dtype).to(DEVICE)


class Checker:
    """Counts this rank's wrong results; prints each one with its worst element."""

    def __init__(self):
        self.failures = self.checks = 0

    def __call__(self, what: str, got: torch.Tensor, want: torch.Tensor) -> bool:
        sync()
        self.checks += 1
        rtol, atol = TOLERANCE.get(got.dtype, (0.0, 0.0))
        ok = got.shape == want.shape and torch.allclose(got.float(), want.float(), rtol=rtol, atol=atol)
        if not ok:
            self.failures += 1
            diff = (got.float() - want.float()).abs() if got.shape == want.shape else None
            where = int(diff.argmax()) if diff is not None and diff.numel() else -1
            print("rank %d: %s WRONG: %s" % (dist.get_rank(), what,
                  "shape %s, want %s" % (tuple(got.shape), tuple(want.shape)) if diff is None else
                  "max |diff| %g at %d (got %s, want %s)" % (float(diff.max()), where, got[where].item(),
                                                           want[where].item())), flush=True)
        return ok


def time_us(fn) -> float:
    """Mean microseconds per call of fn (eager, enqueued on the current stream): WARMUP calls, then
    ITERS timed with CUDA events. Ranks start together; the slowest rank's time is returned."""
    for _ in range(WARMUP):
        fn()
    sync()
    dist.barrier()
    sync()
    if DEVICE == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(ITERS):
            fn()
        end.record()
        end.synchronize()
        mean_us = start.elapsed_time(end) * 1000.0 / ITERS
    else:  # CPU ranks: every call is complete when it returns
        t0 = time.perf_counter()
        for _ in range(ITERS):
            fn()
        mean_us = (time.perf_counter() - t0) * 1e6 / ITERS
    us = torch.tensor([mean_us], device=DEVICE)
    dist.all_reduce(us, op=dist.ReduceOp.MAX)
    return float(us.item())


def human(nbytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return "%d %s" % (nbytes >> shift, unit)
    return "%d B" % nbytes


def print_table(title: str, rows):
    """Rank 0 prints rows of (collective, bytes, ours us, NCCL us[, note]); ratio = NCCL / ours
    (above 1: ours is faster), as every table of this project."""
    if dist.get_rank() != 0:
        return
    print("\n%s (%d ranks, us per call, mean of %d eager calls, slowest rank)" % (title, dist.get_world_size(),
                                                                              ITERS))
    print("%-14s %10s %12s %12s %8s  %s" % ("collective", "size", "ours us", REFERENCE + " us", REFERENCE + "/ours", "note"))
    for row in rows:
        coll, nbytes, ours, nccl = row[:4]
        note = row[4] if len(row) > 4 else ""
        print(("%-14s %10s %12.1f %12.1f %8.2f  %s" % (coll, human(nbytes), ours, nccl, nccl / ours, note)).rstrip())
    print(flush=True)
