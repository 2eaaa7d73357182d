"""Pass: order the ops of one thread block by the local chunks they touch.

Threads of a block split each op's data differently, so an op that writes chunks an earlier op
of the block read or wrote (or reads what it wrote) needs a block barrier (`nop`) in between.
The pass keeps, per buffer, the disjoint chunk ranges touched since the last barrier, each with
the op that touched it last and how (read / write); a barrier forgets them all."""
from mscclpp.language.internal.ops import Barrier, Nop, Pipeline
from mscclpp.language.internal.refs import Access
from mscclpp.language.internal.types import BufferType


class AccessLog:
    """Chunk ranges touched since the last block barrier, per buffer type."""

    def __init__(self):
        self.spans = {t: [] for t in BufferType}

    def forget(self):
        for spans in self.spans.values():
            spans.clear()

    def _hits(self, acc: Access):
        return [s for s in self.spans[acc.buffer] if s.start <= acc.end and acc.start <= s.end]

    def conflicts(self, acc: Access) -> bool:
        """Another op touched some of acc's chunks, and one of the two writes them."""
        return any(s.owner != acc.owner and "w" in (s.kind, acc.kind) for s in self._hits(acc))

    def note(self, acc: Access):
        """acc is now the last touch of its chunks (older ranges keep what lies outside it)."""
        spans = self.spans[acc.buffer]
        for s in self._hits(acc):
            spans.remove(s)
            if s.start < acc.start:
                spans.append(Access(s.owner, s.buffer, s.start, acc.start - 1, s.kind))
            if s.end > acc.end:
                spans.append(Access(s.owner, s.buffer, acc.end + 1, s.end, s.kind))
        spans.append(acc)


def order_accesses(ops):
    """The block's ops with a `nop` before each op that touches chunks in conflict with an earlier
    op since the last barrier. A loop's body is ordered on its own, then the loop counts as one
    op touching everything its body does."""
    log, out = AccessLog(), []
    for op in ops:
        if isinstance(op, (Nop, Barrier)):
            log.forget()
        else:
            if isinstance(op, Pipeline):
                op.ops = order_accesses(op.ops)
            accesses = op.accesses()
            if any(log.conflicts(a) for a in accesses):
                out.append(Nop())
                log.forget()
            for a in accesses:
                log.note(a)
        out.append(op)
    return out
