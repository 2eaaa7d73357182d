"""Seed 001's approach 2 with this library: an allreduce written in the DSL (mscclpp.language),
compiled by mscclpp.compile and run through an Executor on PyTorch tensors, one process per GPU of
one host.

    torchrun --nproc_per_node 4 customized_comm_with_dsl.py

The algorithm is a two-shot allreduce over memory channels (no SwitchChannel: seed 001's NVLS
version needs NVLink multicast, which is off limits on our machines). The plan serves in-place
float sums between its min and max message sizes; other calls fall back to the library's
default_allreduce. main() checks results against torch.distributed's NCCL backend, then rank 0
prints a timing table. The MSCCL++ root: see common.mscclpp_comm."""
import json
import os
import sys

import torch
import torch.distributed as dist

import mscclpp
import mscclpp.utils as mscclpp_utils
from mscclpp.language.channel import MemoryChannel, SyncType
from mscclpp.language.collectives import AllReduce
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Rank
from mscclpp.language.utils import AlgoSpec

import common

MIN_MESSAGE_SIZE = 32 << 10  # below it the library's one-shot kernels win; the plan is not used there
MAX_MESSAGE_SIZE = 1 << 30


def allreduce_two_shot(spec: AlgoSpec) -> CollectiveProgram:
    """In place, zero copy; the buffer is split into one chunk per rank (times spec.instances, the
    copies of the program that run side by side on separate thread blocks).

    1. every rank signals each peer and waits for all of them: everyone's buffer is ready;
    2. reduce-scatter: rank r reads chunk r from every peer's buffer and adds it to its own chunk r;
    3. allgather: rank r writes its finished chunk r into chunk r of every peer's buffer;
    4. signal/wait again, so that nobody returns (and reuses its buffer) while a peer still writes."""
    n = spec.world_size
    with CollectiveProgram.from_spec(spec) as program:
        peers = {r: [p for p in range(n) if p != r] for r in range(n)}
        # channel (r, p): ops recorded on rank r, reaching rank p's buffers
        channels = {(r, p): MemoryChannel(p, r) for r in range(n) for p in peers[r]}

        def barrier(relaxed: bool, data_sync_signal: SyncType, data_sync_wait: SyncType):
            for r in range(n):
                for p in peers[r]:
                    channels[r, p].signal(tb=0, relaxed=relaxed, data_sync=data_sync_signal)
                for p in peers[r]:
                    channels[r, p].wait(tb=0, relaxed=relaxed, data_sync=data_sync_wait)

        barrier(True, SyncType.none, SyncType.after)
        for r in range(n):
            own = Rank(r).get_input_buffer()[r:r + 1]
            for p in peers[r]:  # consecutive reduces of one chunk fuse into one read of all peers
                channels[r, p].reduce(own, [Rank(p).get_input_buffer()[r:r + 1]], tb=0)
            for p in peers[r]:
                channels[r, p].put(Rank(p).get_input_buffer()[r:r + 1], own, tb=0)
        barrier(False, SyncType.before, SyncType.none)
    return program


def compile_allreduce(rank: int, world: int, nranks_per_node: int) -> mscclpp.Algorithm:
    """The plan of allreduce_two_shot for this world, compiled once and cached
    ($MSCCLPP_CACHE_DIR/dsl): every rank gets the same plan, whichever compiles it."""
    spec = AlgoSpec(name="allreduce_two_shot_memory", collective=AllReduce(world, 1, True),
                    nranks_per_node=nranks_per_node, world_size=world, in_place=True,
                    instances=nranks_per_node, protocol="Simple", num_threads_per_block=1024,
                    min_message_size=MIN_MESSAGE_SIZE, max_message_size=MAX_MESSAGE_SIZE)
    return mscclpp.compile(algo=allreduce_two_shot, algo_spec=spec, rank=rank)


class CustomizedComm:
    """all_reduce on an mscclpp.CommGroup through the compiled DSL plan where the plan serves the
    call, else through the library's default_allreduce. Calls are enqueued on `stream` (default:
    the current stream); every rank must make the same calls in the same order."""

    def __init__(self, comm: mscclpp.CommGroup, algorithm: mscclpp.Algorithm):
        self.comm = comm
        self.executor = mscclpp.Executor(comm.communicator)  # DSL plans run through an Executor
        self.algorithm = algorithm
        plan = algorithm.plan
        self.min_bytes, self.max_bytes, self.in_place = plan.min_message_size, plan.max_message_size, plan.inplace
        with open(algorithm.cache_file) as f:  # the plan's chunking: sizes it splits evenly
            doc = json.load(f)
        self.unit = doc["gpus"][0]["input_chunks"] * doc.get("buffer_alignment", 16)
        self.fallback = {a.collective: a for a in mscclpp.AlgorithmCollectionBuilder().build_default_algorithms(
            rank=comm.my_rank)}["allreduce"]
        self.calls = {"dsl": 0, "default": 0}

    def serves(self, tensor: torch.Tensor, op) -> bool:
        """Whether the plan runs this call: a sum (the reduction the plan was written with) of a
        size within its range that its chunks split evenly."""
        return (op == mscclpp.ReduceOp.SUM and self.min_bytes <= tensor.nbytes <= self.max_bytes
                and tensor.nbytes % self.unit == 0)

    def all_reduce(self, tensor: torch.Tensor, op=mscclpp.ReduceOp.SUM, stream=None):
        """In place, as torch.distributed.all_reduce."""
        assert tensor.is_contiguous()
        dtype = mscclpp_utils.torch_dtype_to_mscclpp_dtype(tensor.dtype)
        stream = common.stream_handle(stream)
        if not self.serves(tensor, op):
            self.calls["default"] += 1
            self.fallback.execute(self.comm.communicator, tensor.data_ptr(), tensor.data_ptr(), tensor.nbytes,
                                  tensor.nbytes, dtype, op=op, stream=stream)
            return
        self.calls["dsl"] += 1
        # an in-place plan needs input == output; an out-of-place one a separate output
        out = tensor if self.in_place else torch.empty_like(tensor)
        self.algorithm.execute(comm=self.comm.communicator, executor=self.executor, input_buffer=tensor.data_ptr(),
                               output_buffer=out.data_ptr(), input_size=tensor.nbytes, output_size=out.nbytes,
                               dtype=dtype, stream=stream)
        if out is not tensor:
            tensor.copy_(out)


def check(custom: CustomizedComm, world: int) -> common.Checker:
    ok = common.Checker()
    unit = custom.unit
    # bytes: the plan's smallest size, sizes it serves, one it cannot split (fallback), one below its minimum
    sizes = [custom.min_bytes, 1 << 20, (1 << 20) + unit, 16 << 20, 64 << 20, (1 << 20) + 4, 4 << 10]
    seed = 0
    for dtype in common.DTYPES:
        dt = str(dtype).replace("torch.", "")
        esize = torch.tensor([], dtype=dtype).element_size()
        for nbytes in sizes:
            seed += 1
            x = common.make_input(nbytes // esize, dtype, seed)
            want = x.clone()
            path = "dsl" if custom.serves(x, mscclpp.ReduceOp.SUM) else "default"
            for _ in range(2):  # twice: the second call reuses the executor's cached context
                custom.all_reduce(x)
                dist.all_reduce(want)
            ok("allreduce sum %s %d bytes (%s)" % (dt, nbytes, path), x, want)
        x = common.make_input(1 << 16, dtype, seed)  # max is not in the plan: the fallback runs it
        want = x.clone()
        custom.all_reduce(x, op=mscclpp.ReduceOp.MAX)
        dist.all_reduce(want, op=dist.ReduceOp.MAX)
        ok("allreduce max %s (default)" % dt, x, want)
    return ok


def timing(custom: CustomizedComm):
    rows = []
    for nbytes in (16 << 10, 256 << 10, 1 << 20, 16 << 20, 64 << 20):
        x = torch.zeros(nbytes // 2, dtype=torch.float16, device=common.DEVICE)
        path = "dsl plan" if custom.serves(x, mscclpp.ReduceOp.SUM) else "default_allreduce (below plan's min)"
        rows.append(("allreduce", nbytes, common.time_us(lambda: custom.all_reduce(x)),
                     common.time_us(lambda: dist.all_reduce(x)), path))
    common.print_table("customized_comm_with_dsl: float16 sum, in place", rows)


def main() -> int:
    rank, world, comm = common.setup()
    nranks_per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if nranks_per_node != world:
        raise SystemExit("customized_comm_with_dsl: one host only (the executor reaches peers through cuda-ipc)")
    algorithm = compile_allreduce(rank, world, nranks_per_node)
    custom = CustomizedComm(comm, algorithm)
    if rank == 0:
        print("customized_comm_with_dsl: plan %s (%s), %s, %d to %d bytes, multiples of %d bytes, cached at %s"
              % (algorithm.name, algorithm.collective, "in place" if custom.in_place else "out of place",
                 custom.min_bytes, custom.max_bytes, custom.unit, algorithm.cache_file), flush=True)
    ok = check(custom, world)
    if rank == 0:
        print("customized_comm_with_dsl: %d checks against %s on rank 0, %d wrong; calls: %s"
              % (ok.checks, common.REFERENCE, ok.failures, custom.calls), flush=True)
    timing(custom)
    return common.teardown(comm, ok.failures, "customized_comm_with_dsl")


if __name__ == "__main__":
    sys.exit(main())
