"""mscclpp.torch: the torch.distributed backend "mscclpp" (importing this module registers it).

    import mscclpp.torch  # noqa: F401
    torch.distributed.init_process_group(backend="mscclpp")   # under torchrun; CUDA or CPU tensors

Every operation runs through the C library's collectives (docs/python.md, "torch.distributed
backend"). `import mscclpp` does not import torch; this module does."""
import torch.distributed as dist

from mscclpp.torch.backend import MscclppProcessGroup, create_backend, split_group
from mscclpp.torch.work import CompletedWork, CudaWork, P2PWork

__all__ = ["MscclppProcessGroup", "create_backend", "split_group", "CompletedWork", "CudaWork", "P2PWork",
           "BACKEND_NAME"]

BACKEND_NAME = "mscclpp"

if BACKEND_NAME.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND_NAME, create_backend, extended_api=False, devices=["cpu", "cuda"])
