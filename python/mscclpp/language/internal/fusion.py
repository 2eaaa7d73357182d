"""Pass: fuse adjacent ops of one thread block.

Scanning left to right, the current op absorbs following ops while a rule merges the pair:
several signals / waits / flushes / semaphore ops into one; puts (or gets) of equal size into one
multi-destination op; a reduce and the put of its result into reduce-send; a packet reduce and its
packet copy / packet puts into recpkt / respkt / recspkt; a switch load-reduce and the store of
its result into glres; a block barrier swallowed by a neighbouring barrier. When two ops do not
merge but the second one already starts with a block barrier, the first one's trailing barrier
request is dropped (it would be a second barrier in a row)."""
from mscclpp.language.internal.dataops import PUT_CODES, Reduce, Transfer
from mscclpp.language.internal.ops import SYNC_CODES, Barrier, ChannelSync, Nop, Pipeline, SemaphoreOp
from mscclpp.language.internal.switchops import SwitchReduce, SwitchReduceStore, SwitchStore
from mscclpp.language.internal.types import ChannelType, Instruction as I, SyncType

_AFTER, _BEFORE = SyncType.after, SyncType.before


def fuse(ops):
    """The block's ops with adjacent compatible ops merged (pipelines fused inside as well)."""
    out, i = [], 0
    while i < len(ops):
        current = ops[i]
        if isinstance(current, Pipeline):
            current.ops = fuse(current.ops)
        i += 1
        while i < len(ops):
            merged = _combine(current, ops[i])
            if merged is None:
                break
            current, i = merged, i + 1
        out.append(current)
    return out


def _has(sync: SyncType, side: SyncType) -> bool:
    return (sync & side) == side


def _drop(op, side: SyncType):
    op.sync = op.sync ^ (side & op.sync)


def _is_sync_op(op) -> bool:
    return op.code in SYNC_CODES


def _edge_sync(op, side: SyncType) -> SyncType:
    """The block barrier an op at a loop's edge provides on `side`."""
    if isinstance(op, (Nop, Barrier)):
        return side
    return (side & op.sync) if _is_sync_op(op) else SyncType.none


def loop_sync(loop: Pipeline) -> SyncType:
    """Which ends of a loop's body are block barriers already."""
    if not loop.ops:
        return SyncType.none
    return _edge_sync(loop.ops[0], _BEFORE) | _edge_sync(loop.ops[-1], _AFTER)


def _starts_synced(op) -> bool:
    if isinstance(op, (Nop, Barrier)):
        return True
    if isinstance(op, Pipeline):
        return _has(loop_sync(op), _BEFORE)
    return _is_sync_op(op) and _has(op.sync, _BEFORE)


def _combine(a, b):
    """a and b merged into one op, or None (possibly trimming a's or b's barrier request)."""
    for kind, rule in _RULES:
        if isinstance(a, kind):
            return rule(a, b)
    return None


def _after_nop(a, b):
    if isinstance(b, Nop):
        return Nop()
    if isinstance(b, Barrier) or (isinstance(b, Pipeline) and _starts_synced(b)):
        return b
    if _is_sync_op(b):
        _drop(b, _BEFORE)
    return None


def _after_barrier(a, b):
    if _is_sync_op(b):
        _drop(b, _BEFORE)
        return None
    return a if isinstance(b, Nop) else None


def _after_loop(a, b):
    if not _has(loop_sync(a), _AFTER):
        return None
    if _is_sync_op(b):
        _drop(b, _BEFORE)
        return None
    return a if isinstance(b, Nop) else None


def _after_sync_op(a, b):
    merged = _merge_sync(a, b)
    if merged is None and _starts_synced(b):
        _drop(a, _AFTER)
    return merged


def _merge_sync(a, b):
    if type(a) is not type(b) or a.code != b.code:
        return None
    if isinstance(a, SemaphoreOp):
        return SemaphoreOp(a.code, a.ids + b.ids, a.sync | b.sync)
    if a.channel_type != b.channel_type or (a.code != I.flush and a.ids & b.ids):
        return None  # one op cannot signal / wait on the same channel twice
    return ChannelSync(a.code, a.channel_type, a.ids | b.ids, a.sync | b.sync, a.links + b.links)


def _after_transfer(a, b):
    if not isinstance(b, Transfer) or (b.code, b.channel_type, b.group) != (a.code, a.channel_type, a.group):
        return None
    if a.code == I.get or a.code in PUT_CODES:
        if a.srcs[0].size != b.srcs[0].size:
            return None
        return Transfer(a.code, a.srcs + b.srcs, a.dsts + b.dsts, a.channel_type, a.channel_ids + b.channel_ids,
                        a.group, a.links + b.links)
    if a.code == I.read_put_packet and a.srcs == b.srcs:
        return Transfer(a.code, a.srcs, a.dsts + b.dsts, a.channel_type, a.channel_ids + b.channel_ids, a.group)
    return None


def _after_reduce(a, b):
    if isinstance(b, Reduce):
        return _reduce_more(a, b)
    if isinstance(b, Transfer) and b.group == a.group and b.srcs:
        if b.code == I.copy_packet and a.code == I.reduce_packet and a.dst[0] == b.srcs[0]:
            return _reduce_like(a, pkt_dsts=b.dsts)
        if b.channel_type == ChannelType.memory and _sends_result(a, b):
            return _reduce_like(a, remote_dsts=a.remote_dsts + b.dsts, channel_type=ChannelType.memory)
    return None


_MORE_SOURCES = {I.reduce, I.reduce_packet, I.read_reduce}
_PLAIN_SEND = {I.reduce, I.reduce_send, I.read_reduce, I.read_reduce_send}
_PACKET_SEND = {I.reduce_packet, I.reduce_send_packet}
_COPY_SEND = {I.reduce_copy_packet, I.reduce_copy_send_packet}


def _reduce_more(a, b):
    """Two reductions into the same destination with the same accumulator: one with all sources."""
    same = (a.code == b.code and a.srcs[0] == b.srcs[0] and a.dst == b.dst and a.channel_type == b.channel_type
            and a.reduce_op == b.reduce_op and a.group == b.group)
    if a.code not in _MORE_SOURCES or not same:
        return None
    return Reduce(a.srcs + b.srcs[1:], a.dst, remote_srcs=a.remote_srcs + b.remote_srcs,
                  channel_type=a.channel_type, reduce_op=a.reduce_op, group=a.group, packet=a.packet)


def _sends_result(a, b) -> bool:
    """b puts what reduce a produced (its result, or for recpkt its packet copy) to a peer."""
    if a.code in _PLAIN_SEND:
        return b.code == I.put and a.dst[0] == b.srcs[0]
    if a.code in _PACKET_SEND:
        return b.code == I.put_packet and a.dst[0] == b.srcs[0]
    if a.code in _COPY_SEND:
        return ((b.code == I.put_packet and a.dst[0] == b.srcs[0])
                or (b.code == I.read_put_packet and a.pkt_dsts[0] == b.srcs[0]))
    return False


def _reduce_like(a, **changes):
    fields = dict(srcs=a.srcs, dst=a.dst, remote_srcs=a.remote_srcs, remote_dsts=a.remote_dsts,
                  pkt_dsts=a.pkt_dsts, channel_type=a.channel_type, reduce_op=a.reduce_op, group=a.group,
                  packet=a.packet)
    fields.update(changes)
    return Reduce(**fields)


def _after_switch_reduce(a, b):
    if not (isinstance(b, SwitchStore) and b.code == I.group_store):
        return None
    if (a.buffer_type, a.size, a.dst, a.channel_ids) != (b.buffer_type, b.size, b.src, b.channel_ids):
        return None
    return SwitchReduceStore(a.buffer_type, a.size, a.offset, b.offset, a.channel_ids, a.reduce_op)


_RULES = [(Nop, _after_nop), (Barrier, _after_barrier), (Pipeline, _after_loop), (SemaphoreOp, _after_sync_op),
          (ChannelSync, _after_sync_op), (Transfer, _after_transfer), (Reduce, _after_reduce),
          (SwitchReduce, _after_switch_reduce)]
