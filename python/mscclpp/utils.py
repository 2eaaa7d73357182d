"""Conversions for callers that use PyTorch or NumPy (neither is imported until asked for)."""
from mscclpp import DataType


def torch_dtype_to_mscclpp_dtype(dtype):
    """The DataType of a torch.dtype (torch is imported here, not by the package)."""
    import torch

    table = {torch.int8: DataType.int8, torch.uint8: DataType.uint8, torch.int32: DataType.int32,
             torch.int64: DataType.int64, torch.float16: DataType.float16, torch.float32: DataType.float32,
             torch.float64: DataType.float64, torch.bfloat16: DataType.bfloat16}
    for name, dt in (("uint32", DataType.uint32), ("uint64", DataType.uint64),
                     ("float8_e4m3fn", DataType.float8_e4m3), ("float8_e5m2", DataType.float8_e5m2)):
        if hasattr(torch, name):
            table[getattr(torch, name)] = dt
    if dtype not in table:
        raise ValueError("torch dtype %s has no mscclpp DataType" % dtype)
    return table[dtype]


def numpy_dtype_to_mscclpp_dtype(dtype):
    """The DataType of a NumPy dtype (or anything numpy.dtype takes)."""
    import numpy as np

    names = {"int8": DataType.int8, "uint8": DataType.uint8, "int32": DataType.int32, "uint32": DataType.uint32,
             "int64": DataType.int64, "uint64": DataType.uint64, "float16": DataType.float16,
             "float32": DataType.float32, "float64": DataType.float64}
    name = np.dtype(dtype).name
    if name not in names:
        raise ValueError("NumPy dtype %s has no mscclpp DataType" % name)
    return names[name]
