"""The C library's entry points for the torch backend (python/csrc/torch_ops.c) and their integer
codes: call kinds, rank kinds, and the one reducing call every reduction makes."""
import mscclpp
from mscclpp import _mscclpp

coll, premul, p2p = _mscclpp._torch_coll, _mscclpp._torch_premul, _mscclpp._torch_p2p
AR, AG, RS, A2A, BC, RED = 0, 1, 2, 3, 4, 5
U8 = int(mscclpp.DataType.uint8)
CPU_KIND, GPU_KIND = 1, 2


def reduction(kind, send, recv, count, dtype, red, root, comm, stream):
    """One reducing call (allreduce, reducescatter, reduce) with red = (op value, scalar)."""
    op, scalar = red
    if scalar is None:
        coll(kind, comm, send, recv, count, dtype, op, root, stream)
    else:
        premul(kind, comm, send, recv, count, dtype, scalar[0], scalar[1], root, stream)
