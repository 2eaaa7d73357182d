"""mscclpp: collective communication for GPU and CPU ranks (the C library, bound for Python).

    from mscclpp import CommGroup, ExecutionPlan, Executor, DataType
    comm = CommGroup(interfaceIpPortTrio="127.0.0.1:50000", rank=r, size=n)  # or from the launcher's env
    plan = ExecutionPlan("allreduce.json")
    Executor(comm).execute(plan, x, y, dtype=DataType.float32)  # NumPy arrays on CPU ranks

docs/python.md has the rest; what is not here yet is listed there."""
from enum import IntEnum

from mscclpp._mscclpp import CommGroup, ExecutionPlan, Executor, get_unique_id, version

__all__ = ["CommGroup", "ExecutionPlan", "Executor", "DataType", "ReduceOp", "get_unique_id", "version"]


class DataType(IntEnum):
    """Element types, with the C library's (and NCCL's) values."""
    int8 = 0
    uint8 = 1
    int32 = 2
    uint32 = 3
    int64 = 4
    uint64 = 5
    float16 = 6
    float32 = 7
    float64 = 8
    bfloat16 = 9
    float8_e4m3 = 10
    float8_e5m2 = 11


class ReduceOp(IntEnum):
    """Reduction operators (NCCL's values); NOP: the collective reduces nothing."""
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4
    PREMUL_SUM = 5
    NOP = 255
