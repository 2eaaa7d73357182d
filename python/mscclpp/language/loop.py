"""LoopIterationContext: ops recorded inside `with` run as a loop over the data (a `pipeline` op
per thread block), `unit` bytes per iteration."""
from mscclpp.language.errors import DSLError
from mscclpp.language.internal.globals import get_program
from mscclpp.language.internal.ops import Pipeline

__all__ = ["LoopIterationContext"]


class LoopIterationContext:
    def __init__(self, unit: int, num_chunks: int):
        for what, value in (("unit", unit), ("num_chunks", num_chunks)):
            if not isinstance(value, int) or value <= 0:
                raise DSLError(f"LoopIterationContext: {what} must be a positive integer, not {value!r}")
        self.unit, self.num_chunks = unit, num_chunks
        self.operations = []  # (rank, tb, op) in recording order

    def __enter__(self):
        get_program().set_loop_context(self)

    def __exit__(self, exc_type, exc_value, traceback):
        prog = get_program()
        prog.set_loop_context(None)
        loops = {}
        for rank, tb, op in self.operations:
            loops.setdefault((rank, tb), Pipeline(self.unit, self.num_chunks)).ops.append(op)
        for (rank, tb), loop in loops.items():
            prog.record(rank, tb, loop)

    def add_operation(self, rank: int, tb: int, operation):
        self.operations.append((rank, tb, operation))
