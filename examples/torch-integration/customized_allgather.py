"""Seed 001's approach 3 with this library: customized_allgather.cu compiled by
mscclpp.compile_native and run as a PyTorch all_gather, one process per GPU of one host.

    torchrun --nnodes=1 --nproc_per_node=8 customized_allgather.py
    MSCCLPP_MASTER_ADDR=127.0.0.1 MSCCLPP_MASTER_PORT=29500 torchrun --nnodes=1 --nproc_per_node=8 ...

The MSCCL++ root is MSCCLPP_MASTER_ADDR:MSCCLPP_MASTER_PORT when set, else a unique id that
torch.distributed broadcasts (common.mscclpp_comm). main() checks the results against torch.distributed's NCCL backend
(float32, bfloat16, float16; several sizes; in place), then rank 0 prints a timing table.
(python/tests/native/gpu_native_check.py checks the same algorithm more thoroughly.)"""
import os
import sys

import torch
import torch.distributed as dist

import mscclpp
import mscclpp.utils as mscclpp_utils

import common


class CustomizedComm:
    def __init__(self, comm: mscclpp.CommGroup):
        self.comm = comm
        mod = mscclpp.compile_native(name="customized_allgather",
                                     file=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "customized_allgather.cu"))
        self.algorithm = mscclpp.Algorithm.create_from_native_capsule(mod.create_allgather_algorithm())

    def all_gather(self, tensor: torch.Tensor, out_tensor: torch.Tensor, stream=None):
        self.algorithm.execute(self.comm.communicator, tensor.data_ptr(), out_tensor.data_ptr(), tensor.nbytes,
                               out_tensor.nbytes, mscclpp_utils.torch_dtype_to_mscclpp_dtype(tensor.dtype),
                               stream=(stream or torch.cuda.current_stream()).cuda_stream)


# elements per rank: tiny, odd, a context per output size each
COUNTS = (1, 1000, 4099, 1 << 16, (1 << 20) + 3, 1 << 22)


def check(custom: CustomizedComm, world: int) -> common.Checker:
    """all_gather against torch.distributed's all_gather_into_tensor (NCCL), every dtype and size,
    twice on the same buffers with new values, then once in place (input = this rank's slot of the
    output, as NCCL allows)."""
    ok = common.Checker()
    seed = 0
    for dtype in common.DTYPES:
        dt = str(dtype).replace("torch.", "")
        for count in COUNTS:
            y = torch.empty(count * world, dtype=dtype, device="cuda")
            want = torch.empty_like(y)
            for _ in range(2):
                seed += 1
                x = common.make_input(count, dtype, seed)
                custom.all_gather(x, y)
                dist.all_gather_into_tensor(want, x)
                ok("allgather %s x %d" % (dt, count), y, want)
        seed += 1
        x = common.make_input(COUNTS[-2], dtype, seed)
        y = torch.empty(x.numel() * world, dtype=dtype, device="cuda")
        mine = y[dist.get_rank() * x.numel():(dist.get_rank() + 1) * x.numel()]
        mine.copy_(x)
        custom.all_gather(mine, y)
        want = torch.empty_like(y)
        dist.all_gather_into_tensor(want, x)
        ok("allgather in place %s x %d" % (dt, x.numel()), y, want)
    return ok


def timing(custom: CustomizedComm, world: int):
    rows = []
    for nbytes in (64 << 10, 1 << 20, 16 << 20, 64 << 20):
        x = torch.zeros(nbytes // 2, dtype=torch.float16, device="cuda")
        y = x.new_empty(x.numel() * world)
        rows.append(("allgather", nbytes, common.time_us(lambda: custom.all_gather(x, y)),
                     common.time_us(lambda: dist.all_gather_into_tensor(y, x)), "size per rank"))
    common.print_table("customized_allgather: float16", rows)


def main() -> int:
    rank, world, comm = common.setup()
    custom = CustomizedComm(comm)
    ok = check(custom, world)
    if rank == 0:
        print("customized_allgather: %d checks against NCCL on rank 0, %d wrong" % (ok.checks, ok.failures),
              flush=True)
    timing(custom, world)
    return common.teardown(comm, ok.failures, "customized_allgather")


if __name__ == "__main__":
    sys.exit(main())
