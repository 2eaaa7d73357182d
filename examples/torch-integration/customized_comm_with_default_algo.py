"""Seed 001's approach 1 with this library: a communicator class of the user's that runs the library's
default algorithms (AlgorithmCollectionBuilder) on PyTorch tensors, one process per GPU of one host.

    torchrun --nproc_per_node 4 customized_comm_with_default_algo.py
    MSCCLPP_MASTER_ADDR=127.0.0.1 MSCCLPP_MASTER_PORT=29600 torchrun --nproc_per_node 4 ...

The MSCCL++ root is MSCCLPP_MASTER_ADDR:MSCCLPP_MASTER_PORT when set, else a unique id that
torch.distributed broadcasts (common.mscclpp_comm). main() checks every collective against torch.distributed's NCCL backend
(float32, bfloat16, float16; several sizes and ops), then rank 0 prints a timing table."""
import sys

import torch
import torch.distributed as dist

import mscclpp
import mscclpp.utils as mscclpp_utils

import common


class CustomizedComm:
    """torch.distributed-like collectives on an mscclpp.CommGroup. Every call is enqueued on
    `stream` (default: the current stream) and returns at once; every rank must make the same calls
    in the same order."""

    def __init__(self, comm: mscclpp.CommGroup):
        self.comm = comm
        # Seed 001's scratch: GPU memory that peers can map, seen by torch through DLPack. This
        # library keeps its own scratch, so build_default_algorithms accepts it without needing it;
        # it is passed as the seed does so that code written for MSCCL++ runs unchanged.
        dlpack = mscclpp.RawGpuBuffer(1 << 27).to_dlpack(data_type=str(torch.float16))
        self.scratch_buffer = torch.utils.dlpack.from_dlpack(dlpack)
        algorithms = mscclpp.AlgorithmCollectionBuilder().build_default_algorithms(
            scratch_buffer=self.scratch_buffer.data_ptr(), scratch_buffer_size=self.scratch_buffer.nbytes,
            rank=comm.my_rank)
        # Seed 001 picks MSCCL++'s NVLS kernels by name and message size ("default_allreduce_nvls_packet",
        # "default_allreduce_nvls_with_copy"). They do not exist here: NVLink multicast is off limits
        # on our machines. This library has one algorithm per collective, "default_<collective>",
        # which picks its kernel by size itself (its tuning table).
        by_name = {algo.name: algo for algo in algorithms}
        self._allreduce = by_name["default_allreduce"]
        self._allgather = by_name["default_allgather"]
        self._reducescatter = by_name["default_reducescatter"]
        self._broadcast = by_name["default_broadcast"]
        self._alltoall = by_name["default_alltoall"]

    def _run(self, algo, inp: torch.Tensor, out: torch.Tensor, op=mscclpp.ReduceOp.NOP, root=0, stream=None):
        assert inp.is_contiguous() and out.is_contiguous() and inp.dtype == out.dtype
        algo.execute(self.comm.communicator, inp.data_ptr(), out.data_ptr(), inp.nbytes, out.nbytes,
                     mscclpp_utils.torch_dtype_to_mscclpp_dtype(inp.dtype), op=op,
                     stream=common.stream_handle(stream), root=root)

    def all_reduce(self, tensor: torch.Tensor, op=mscclpp.ReduceOp.SUM, stream=None):
        """In place, as torch.distributed.all_reduce."""
        self._run(self._allreduce, tensor, tensor, op=op, stream=stream)

    def all_gather(self, output: torch.Tensor, input: torch.Tensor, stream=None):
        """output (world x input's size) = every rank's input in rank order (all_gather_into_tensor)."""
        self._run(self._allgather, input, output, stream=stream)

    def reduce_scatter(self, output: torch.Tensor, input: torch.Tensor, op=mscclpp.ReduceOp.SUM, stream=None):
        """output = this rank's 1/world slice of the reduction of every rank's input (reduce_scatter_tensor)."""
        self._run(self._reducescatter, input, output, op=op, stream=stream)

    def broadcast(self, tensor: torch.Tensor, src: int, stream=None):
        """In place: every rank's tensor becomes rank src's."""
        self._run(self._broadcast, tensor, tensor, root=src, stream=stream)

    def all_to_all(self, output: torch.Tensor, input: torch.Tensor, stream=None):
        """Block j of input goes to rank j, block i of output comes from rank i (all_to_all_single)."""
        self._run(self._alltoall, input, output, stream=stream)


# (name, mscclpp op, torch op, input maker)
OPS = (("sum", mscclpp.ReduceOp.SUM, dist.ReduceOp.SUM, common.make_input),
       ("prod", mscclpp.ReduceOp.PROD, dist.ReduceOp.PRODUCT, common.prod_input),
       ("max", mscclpp.ReduceOp.MAX, dist.ReduceOp.MAX, common.make_input),
       ("min", mscclpp.ReduceOp.MIN, dist.ReduceOp.MIN, common.make_input),
       ("avg", mscclpp.ReduceOp.AVG, dist.ReduceOp.AVG, common.make_input))
COUNTS = (1, 1000, 4099, 1 << 16, (1 << 20) + 8, 1 << 22)  # elements (per rank for allgather/alltoall)


def check(custom: CustomizedComm, world: int) -> common.Checker:
    """Every collective of CustomizedComm against NCCL on copies of the same input."""
    ok = common.Checker()
    seed = 0
    for dtype in common.DTYPES:
        dt = str(dtype).replace("torch.", "")
        for count in COUNTS:
            seed += 1
            for name, op, torch_op, make in OPS:
                if name in ("prod", "min", "avg") and count > 1 << 16:
                    continue  # the other ops at the small and mid sizes only: keeps the run short
                x = make(count, dtype, seed)
                want = x.clone()
                custom.all_reduce(x, op=op)
                dist.all_reduce(want, op=torch_op)
                ok("allreduce %s %s x %d" % (name, dt, count), x, want)
            x = common.make_input(count, dtype, seed)
            got, want = x.new_empty(count * world), x.new_empty(count * world)
            custom.all_gather(got, x)
            dist.all_gather_into_tensor(want, x)
            ok("allgather %s x %d" % (dt, count), got, want)
            x = common.make_input(count * world, dtype, seed)
            for name, op, torch_op in (("sum", mscclpp.ReduceOp.SUM, dist.ReduceOp.SUM),
                                       ("max", mscclpp.ReduceOp.MAX, dist.ReduceOp.MAX)):
                got, want = x.new_empty(count), x.new_empty(count)
                custom.reduce_scatter(got, x, op=op)
                dist.reduce_scatter_tensor(want, x, op=torch_op)
                ok("reducescatter %s %s x %d" % (name, dt, count), got, want)
            src = seed % world
            x = common.make_input(count, dtype, seed)
            want = x.clone()
            custom.broadcast(x, src)
            dist.broadcast(want, src)
            ok("broadcast from %d %s x %d" % (src, dt, count), x, want)
            x = common.make_input(count * world, dtype, seed)
            got, want = torch.empty_like(x), torch.empty_like(x)
            custom.all_to_all(got, x)
            dist.all_to_all_single(want, x)
            ok("alltoall %s x %d" % (dt, count), got, want)
    return ok


def timing(custom: CustomizedComm, world: int):
    """allreduce (in place) and allgather (per-rank input size) in float16, ours vs NCCL."""
    rows = []
    for nbytes in (64 << 10, 1 << 20, 16 << 20, 64 << 20):
        x = torch.zeros(nbytes // 2, dtype=torch.float16, device=common.DEVICE)
        rows.append(("allreduce", nbytes, common.time_us(lambda: custom.all_reduce(x)),
                     common.time_us(lambda: dist.all_reduce(x))))
    for nbytes in (64 << 10, 1 << 20, 16 << 20):
        x = torch.zeros(nbytes // 2, dtype=torch.float16, device=common.DEVICE)
        y = x.new_empty(x.numel() * world)
        rows.append(("allgather", nbytes, common.time_us(lambda: custom.all_gather(y, x)),
                     common.time_us(lambda: dist.all_gather_into_tensor(y, x)), "size per rank"))
    common.print_table("customized_comm_with_default_algo: float16", rows)


def main() -> int:
    rank, world, comm = common.setup()
    custom = CustomizedComm(comm)
    ok = check(custom, world)
    if rank == 0:
        print("customized_comm_with_default_algo: %d checks against %s on rank 0, %d wrong"
              % (ok.checks, common.REFERENCE, ok.failures), flush=True)
    timing(custom, world)
    return common.teardown(comm, ok.failures, "customized_comm_with_default_algo")


if __name__ == "__main__":
    sys.exit(main())
