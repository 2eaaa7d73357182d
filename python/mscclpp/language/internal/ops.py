"""Operation records of one thread block, as the DSL calls create them and the plan writes them.

Each record knows the local chunk ranges it touches (`accesses`, for the dependency pass), how to
move to another replicated instance (`relocate`, `renumber`) and its plan form (`to_dict`). This
module has the base and the control ops (barriers, semaphores, signal / wait / flush, loops);
dataops.py the data movement and reductions, switchops.py the multicast ops."""
import itertools
from typing import List

from mscclpp.language.internal.refs import Access
from mscclpp.language.internal.types import ChannelType, Instruction as I, SyncType

_next_uid = itertools.count()

SYNC_CODES = {I.sem_acquire, I.sem_release, I.signal, I.wait, I.relaxed_signal, I.relaxed_wait, I.flush}


class Op:
    """Base record: an op code, a block-barrier request (`sync`) and a unique owner id."""

    def __init__(self, code: I, sync: SyncType = SyncType.none):
        self.code = code
        self.sync = sync
        self.uid = next(_next_uid)

    def accesses(self) -> List[Access]:
        return []

    def relocate(self, move):
        """Apply `move(index, size)` to every chunk index the op names (instance replication)."""

    def renumber(self, move):
        """Apply `move(id)` to every per-GPU id the op names (semaphores, barriers)."""

    def to_dict(self) -> dict:
        return {"name": self.code.value}


class Nop(Op):
    """Barrier of all threads of this block."""

    def __init__(self):
        super().__init__(I.nop)


class Barrier(Op):
    """Barrier among the blocks `tbs` of this GPU, id `barrier_id`."""

    def __init__(self, barrier_id: int, tbs: List[int]):
        super().__init__(I.barrier)
        self.barrier_id = barrier_id
        self.tbs = list(tbs)

    def renumber(self, move):
        self.barrier_id = move(self.barrier_id)
        self.tbs = [move(t) for t in self.tbs]  # clone k meets the clones k of the other blocks

    def to_dict(self):
        return {"name": self.code.value, "barrier_id": self.barrier_id, "num_threadblocks": len(self.tbs)}


class SemaphoreOp(Op):
    """sem_acquire / sem_release of this GPU's semaphores `ids`."""

    def __init__(self, code: I, ids: List[int], sync: SyncType):
        super().__init__(code, sync)
        self.ids = list(ids)

    def renumber(self, move):
        self.ids = [move(i) for i in self.ids]

    def to_dict(self):
        return {"name": self.code.value, "semaphore_ids": list(self.ids)}


class ChannelSync(Op):
    """signal / wait (relaxed or not) / flush on the block's channels `ids` (a set, as in the plan's
    own writer, so merged ops list their channels in the same order)."""

    def __init__(self, code: I, channel_type: ChannelType, ids, sync: SyncType, links=()):
        super().__init__(code, sync)
        self.channel_type = channel_type
        self.ids = set(ids)
        self.links = list(links)  # the Links it signals or waits on (checks only, not written)

    def renumber(self, move):
        self.links = [link.renumbered(move) for link in self.links]

    def to_dict(self):
        return {"name": self.code.value, "channel_ids": list(self.ids), "channel_type": self.channel_type.value}


class Pipeline(Op):
    """The ops of one block inside a LoopIterationContext, run once per `unit_size` bytes."""

    def __init__(self, unit_size: int, num_chunks: int, ops=None):
        super().__init__(I.pipeline)
        self.unit_size, self.num_chunks = unit_size, num_chunks
        self.ops: List[Op] = list(ops or [])

    def accesses(self):
        out = []
        for op in self.ops:
            for a in op.accesses():
                a.owner = self.uid  # the whole loop is one op for the enclosing block
                out.append(a)
        return out

    def relocate(self, move):
        for op in self.ops:
            op.relocate(move)

    def renumber(self, move):
        for op in self.ops:
            op.renumber(move)

    def to_dict(self):
        return {"name": self.code.value, "iter_context": {"unit_size": self.unit_size, "num_chunks": self.num_chunks},
                "ops": [op.to_dict() for op in self.ops]}
