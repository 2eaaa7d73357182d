"""Pass: turn the `data_sync` requests of synchronizing ops (signal, wait, flush, semaphores) into
block barriers (`nop`) before and / or after them."""
from mscclpp.language.internal.ops import SYNC_CODES, Nop, Pipeline
from mscclpp.language.internal.types import SyncType


def insert_block_barriers(ops):
    out = []
    for op in ops:
        if isinstance(op, Pipeline):
            op.ops = insert_block_barriers(op.ops)
        wants = op.sync if op.code in SYNC_CODES else SyncType.none
        if wants in (SyncType.before, SyncType.both):
            out.append(Nop())
        out.append(op)
        if wants in (SyncType.after, SyncType.both):
            out.append(Nop())
    return out
