"""Check: inside a loop (LoopIterationContext) no op moves more chunks than the loop's num_chunks
(each iteration covers at most num_chunks chunks of every op)."""
from mscclpp.language.errors import DSLError
from mscclpp.language.internal.dataops import Reduce, Transfer
from mscclpp.language.internal.ops import Pipeline


def _sizes(op):
    if isinstance(op, Transfer):
        return [r.size for r in op.srcs + op.dsts]
    if isinstance(op, Reduce):
        return [r.size for r in op.srcs + op.dst + op.pkt_dsts + op.remote_srcs + op.remote_dsts]
    size = getattr(op, "size", None)  # switch ops
    return [size] if size is not None else []


def check_loops(prog):
    for gpu in prog.gpus:
        for block in gpu.blocks:
            for loop in (op for op in block.ops if isinstance(op, Pipeline)):
                for op in loop.ops:
                    big = max(_sizes(op), default=0)
                    if big > loop.num_chunks:
                        raise DSLError(f"rank {gpu.rank} thread block {block.id}: {op.code.value} inside a loop "
                                       f"of num_chunks {loop.num_chunks} moves {big} chunks")
