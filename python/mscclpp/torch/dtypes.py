"""torch dtypes and ReduceOps as the library's codes, and the views of tensors that reductions run on.
Unsupported marks what the backend does not do natively (see fallback.py)."""
import torch
import torch.distributed as dist

from mscclpp.torch.library import U8
from mscclpp.utils import torch_dtype_to_mscclpp_dtype

RT = dist.ReduceOp.RedOpType
OPS = {RT.SUM: 0, RT.PRODUCT: 1, RT.MAX: 2, RT.MIN: 3, RT.AVG: 4}
OPS_BY_VALUE = {k.value: v for k, v in OPS.items()}  # by the enum's int: hashing the enum is slow
BOOL_OPS = {RT.SUM: 2, RT.PRODUCT: 3, RT.MAX: 2, RT.MIN: 3}  # or / and, as ProcessGroupNCCL
BITWISE = {RT.BAND: torch.bitwise_and, RT.BOR: torch.bitwise_or, RT.BXOR: torch.bitwise_xor}


def _dtype_table():
    table = {}
    for name in ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
                 "float8_e4m3fn", "float8_e5m2"):
        dt = getattr(torch, name, None)
        if dt is not None:
            try:
                table[dt] = int(torch_dtype_to_mscclpp_dtype(dt))
            except ValueError:
                pass
    return table


DTYPES = _dtype_table()


class Unsupported(Exception):
    """An operation this backend does not do natively (raised as NotImplementedError or forwarded)."""


def contig(t):
    return t if t.is_contiguous() else t.contiguous()


def red_view(t, kind):
    """(tensor to reduce, mscclpp dtype) for a reduction of t; complex sums as their real pairs."""
    dt = DTYPES.get(t.dtype)
    if dt is not None:
        return t, dt
    if t.dtype.is_complex and kind in (RT.SUM, RT.AVG, RT.PREMUL_SUM):
        r = torch.view_as_real(t)
        return r, DTYPES[r.dtype]
    if t.dtype is torch.bool:
        return t.view(torch.uint8), U8
    raise Unsupported("reductions of %s tensors" % t.dtype)


def prep_red(t, reduce_op):
    """(view, dtype, is_bool) of a tensor to reduce; bool: or/and as max/min."""
    kind = reduce_op.op
    is_bool = t.dtype is torch.bool
    if is_bool and kind not in BOOL_OPS:
        raise Unsupported("ReduceOp %s on bool tensors" % kind.name)
    v, dt = red_view(t, kind)
    return v, dt, is_bool


def red_op(reduce_op, t, device, is_bool=False):
    """(op value, None, None), or (None, (scalar pointer, residence), scalar tensor) for a premul
    sum, for the reduction of tensor t (already in its reduced view) by torch's ReduceOp."""
    kind = reduce_op.op
    if is_bool:
        return BOOL_OPS[kind], None, None
    if kind in OPS:
        return OPS[kind], None, None
    if kind == RT.PREMUL_SUM:
        factor = reduce_op.__getstate__()[1]
        if isinstance(factor, torch.Tensor):
            if device.type == "cuda" and factor.is_cuda:
                s = factor.to(device=device, dtype=t.dtype).reshape(1)
                return None, (s.data_ptr(), 0), s  # read by the kernel (device memory)
            factor = factor.item()
        s = torch.tensor([factor], dtype=t.dtype)
        return None, (s.data_ptr(), 1), s  # copied when the op is made
    raise Unsupported("ReduceOp %s" % kind.name)
