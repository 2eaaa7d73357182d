"""Seed 001's approach 3 with this library: customized_allgather.cu compiled by
mscclpp.compile_native and run as a PyTorch all_gather, one process per GPU of one host.

    MSCCLPP_MASTER_ADDR=127.0.0.1 MSCCLPP_MASTER_PORT=29500 \\
        torchrun --nnodes=1 --nproc_per_node=8 customized_allgather.py

(python/tests/native/gpu_native_check.py checks the same algorithm more thoroughly.)"""
import os

import torch

import mscclpp
import mscclpp.utils as mscclpp_utils


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


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    host, port = os.environ["MSCCLPP_MASTER_ADDR"], os.environ["MSCCLPP_MASTER_PORT"]
    comm = mscclpp.CommGroup(interfaceIpPortTrio="%s:%s" % (host, port), rank=rank, size=world)
    custom = CustomizedComm(comm)
    x = torch.full((1 << 20,), rank, dtype=torch.float16, device="cuda")
    y = torch.empty(x.numel() * world, dtype=x.dtype, device="cuda")
    custom.all_gather(x, y)
    torch.cuda.synchronize()
    want = torch.arange(world, dtype=x.dtype, device="cuda").repeat_interleave(x.numel())
    assert torch.equal(y, want), "rank %d: wrong result" % rank
    comm.barrier()
    if rank == 0:
        print("customized_allgather: %d ranks OK" % world)
    comm.close()


if __name__ == "__main__":
    main()
