"""mscclpp: collective communication for GPU and CPU ranks (the C library, bound for Python).

    from mscclpp import CommGroup, ExecutionPlan, Executor, DataType
    comm = CommGroup(interfaceIpPortTrio="127.0.0.1:50000", rank=r, size=n)  # or from the launcher's env
    plan = ExecutionPlan("allreduce.json")
    Executor(comm).execute(plan, x, y, dtype=DataType.float32)  # NumPy arrays on CPU ranks

docs/python.md has the rest; what is not here yet is listed there."""
from enum import IntEnum

try:
    from mscclpp import _mscclpp
except ImportError as _err:  # a source tree without the built extension: mscclpp.language still works
    _mscclpp = None
    _mscclpp_error = _err

_EXTENSION_NAMES = ("CommGroup", "ExecutionPlan", "Executor", "RawGpuBuffer", "GpuBuffer", "get_unique_id", "version")


def __getattr__(name):
    """The extension's names, looked up on first use (GpuBuffer is RawGpuBuffer, seed 000's name)."""
    if name not in _EXTENSION_NAMES:
        raise AttributeError(f"module 'mscclpp' has no attribute {name!r}")
    if _mscclpp is None:
        raise ImportError(f"mscclpp.{name} needs the C extension mscclpp._mscclpp, which failed to import "
                          f"({_mscclpp_error}); install the package with `pip install .` "
                          "(mscclpp.language works without it)")
    return getattr(_mscclpp, "RawGpuBuffer" if name == "GpuBuffer" else name)

__all__ = ["CommGroup", "ExecutionPlan", "Executor", "RawGpuBuffer", "GpuBuffer", "DataType", "ReduceOp", "ExecutionPlanRegistry", "Algorithm",
           "AlgorithmCollectionBuilder", "get_unique_id", "version"]


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


class ExecutionPlanRegistry:
    """The C library's plan registry: registered plans serve its collectives (the Algorithm objects
    below, and C code of the process) where they fit the call; the selector picks among them.
    Every rank must register the same plans in the same order and select alike."""

    @staticmethod
    def register_plan(plan, priority=0, ranks_per_node=0):
        """Hands plan to the registry (which owns it from then on); returns its id."""
        return _mscclpp.register_plan(plan, priority, ranks_per_node)

    @staticmethod
    def unregister(plan_or_id):
        _mscclpp.unregister_plan(plan_or_id.registry_id if isinstance(plan_or_id, _mscclpp.ExecutionPlan) else plan_or_id)

    @staticmethod
    def clear():
        _mscclpp.registry_clear()

    @staticmethod
    def plans():
        """[(id, name, collective, calls served)] in selection order."""
        return _mscclpp.registry_list()

    @staticmethod
    def set_selector(selector):
        """selector(request) -> the name (or registered ExecutionPlan) of the candidate to run, or None
        for the built-in algorithms. request: a dict with collective, message_size, count, dtype, op,
        world_size, ranks_per_node, rank, in_place, root and candidates (their names, in priority
        order). selector=None restores the default (the first candidate)."""
        _mscclpp.set_selector(selector)


class Algorithm:
    """A collective as seed 001's Algorithm: by default one of the C library's collectives by name,
    whose execute() runs the library's collective (a registered plan when one serves the call, else
    the built-in algorithm the tuning picks); create_from_native_capsule gives a native algorithm
    (compile_native) and mscclpp.compile a DSL plan, with the same execute()."""

    def __init__(self, name, collective, _impl=None):
        self.name, self.collective = name, collective
        self._impl = _impl  # None: the library's collective; else a callable taking execute's arguments

    def __repr__(self):
        return "Algorithm(%r, %r)" % (self.name, self.collective)

    @classmethod
    def create_from_native_capsule(cls, capsule):
        """The Algorithm of a native algorithm: capsule is what a factory of a compile_native module
        returns. ValueError names what is wrong with its def (ABI version, missing launch, ...)."""
        if _mscclpp is None:
            raise ImportError("Algorithm.create_from_native_capsule needs the C extension mscclpp._mscclpp, which "
                              "failed to import (%s)" % _mscclpp_error)
        native = _mscclpp.NativeAlgorithm(capsule)
        algo = cls(native.name, native.collective, _impl=_NativeRunner(native))
        algo.native = native
        return algo

    def release(self, comm):
        """A native algorithm's state on comm torn down now (as destroying comm would); the next
        execute on comm starts with its init again."""
        if not isinstance(self._impl, _NativeRunner):
            raise TypeError("Algorithm.release: %r is not a native algorithm" % (self.name,))
        self._impl.native.release(comm)

    def execute(self, comm, input_buffer, output_buffer, input_size, output_size, dtype, op=ReduceOp.NOP,
                stream=0, executor=None, nblocks=0, nthreads_per_block=0, extras=None, root=0):
        """Seed 001's interface. Buffers: integers (device pointers) or NumPy arrays (CPU ranks).
        The library's collectives: op NOP on a reduction means SUM; executor, nblocks,
        nthreads_per_block and extras are accepted for compatibility (the library sizes its own
        launches). A native algorithm gets every argument but executor and root (extras: a dict of
        str to int); a DSL plan runs through executor (one of comm's made here when None)."""
        if self._impl is not None:
            return self._impl(comm, input_buffer, output_buffer, input_size, output_size, dtype, op, stream, executor,
                              nblocks, nthreads_per_block, extras, root)
        del executor, nblocks, nthreads_per_block, extras
        red = ReduceOp.SUM if op == ReduceOp.NOP else op
        _mscclpp.collective(self.collective, comm, input_buffer, output_buffer, input_size, output_size, int(dtype),
                            int(red), root, stream)


class _NativeRunner:
    """Algorithm.execute for a native algorithm (_mscclpp.NativeAlgorithm)."""

    def __init__(self, native):
        self.native = native

    def __call__(self, comm, input_buffer, output_buffer, input_size, output_size, dtype, op, stream, executor,
                 nblocks, nthreads_per_block, extras, root):
        del executor, root
        self.native.execute(comm, input_buffer, output_buffer, -1 if input_size is None else input_size,
                            -1 if output_size is None else output_size, int(dtype), int(op), stream, nblocks,
                            nthreads_per_block, extras)


class AlgorithmCollectionBuilder:
    """Builds the collection of the library's collectives as Algorithm objects."""

    COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce")

    def build_default_algorithms(self, scratch_buffer=0, scratch_buffer_size=0, rank=0):
        """One Algorithm per collective, named default_<collective>. The library keeps its own
        scratch, so scratch_buffer and its size are accepted and not needed; rank is unused too."""
        del scratch_buffer, scratch_buffer_size, rank
        return [Algorithm("default_" + c, c) for c in self.COLLECTIVES]


# Native algorithms and DSL plans (issue 19): mscclpp.compile_native, mscclpp.compile.
from mscclpp.native import NativeCompileError, NativeModule, compile_native, get_include, get_lib  # noqa: E402
from mscclpp.compile import compile  # noqa: E402,A001 - the function, not the submodule

__all__ += ["compile", "compile_native", "get_include", "get_lib", "NativeCompileError", "NativeModule"]
