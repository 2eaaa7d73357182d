"""Data op records: copies, puts and gets (Transfer) and the reduce family (Reduce)."""
from typing import Optional

from mscclpp.language.errors import DSLError
from mscclpp.language.internal.ops import Op
from mscclpp.language.internal.refs import GroupInfo, span
from mscclpp.language.internal.types import ChannelType, Instruction as I, ReduceOperationType

PUT_CODES = {I.put, I.put_packet, I.put_with_signal, I.put_with_signal_and_flush}
_READS_SRC = {I.copy, I.copy_packet} | PUT_CODES
_WRITES_DST = {I.copy, I.unpack_packet, I.get}


class Transfer(Op):
    """copy / cpkt / upkt (local), get (remote -> local), put family (local -> remote)."""

    def __init__(self, code: I, srcs, dsts, channel_type=ChannelType.none, channel_ids=(), group=None, links=()):
        super().__init__(code)
        self.srcs = list(srcs)
        self.dsts = list(dsts)
        self.channel_type = channel_type
        self.channel_ids = list(channel_ids)
        self.group: Optional[GroupInfo] = group
        self.links = list(links)  # pws / pwsf: the Links they signal (checks only, not written)

    def accesses(self):
        # packets carry their own flags, so packet reads (upkt, rppkt) and packet writes (cpkt) need
        # no block barrier; remote chunks are not this block's to order
        reads = self.srcs if self.code in _READS_SRC else []
        writes = self.dsts if self.code in _WRITES_DST else []
        return [span(self.uid, r, "r") for r in reads] + [span(self.uid, w, "w") for w in writes]

    def relocate(self, move):
        for ref in self.srcs + self.dsts:
            ref.index = move(ref.index, ref.size)

    def renumber(self, move):
        self.links = [link.renumbered(move) for link in self.links]

    def to_dict(self):
        d = {"name": self.code.value, "src_buff": [r.to_dict() for r in self.srcs],
             "dst_buff": [r.to_dict() for r in self.dsts]}
        if self.code == I.get or self.channel_type == ChannelType.port:
            d["channel_ids"] = list(self.channel_ids)
        if self.channel_type != ChannelType.none:
            d["channel_type"] = self.channel_type.value
        if self.group is not None:
            d["tbg_info"] = self.group.to_dict()
        return d


class Reduce(Op):
    """The reduce family: local sources (the first one is also the accumulator) and remote sources
    reduced into `dst`; optionally a packet copy kept locally (`pkt_dsts`) and the result sent to
    remote chunks (`remote_dsts`). The op code follows from which of these are present."""

    def __init__(self, srcs, dst, remote_srcs=(), remote_dsts=(), pkt_dsts=(), channel_type=ChannelType.none,
                 reduce_op=ReduceOperationType.sum, group=None, packet=False):
        self.srcs, self.dst = list(srcs), list(dst)
        self.remote_srcs, self.remote_dsts, self.pkt_dsts = list(remote_srcs), list(remote_dsts), list(pkt_dsts)
        self.channel_type, self.reduce_op, self.group, self.packet = channel_type, reduce_op, group, packet
        super().__init__(self._code())

    def _code(self) -> I:
        if self.remote_srcs and self.packet:
            raise DSLError("a packet reduce cannot read remote chunks directly")
        if self.remote_srcs:
            return I.read_reduce_send if self.remote_dsts else I.read_reduce
        if self.packet:
            if self.remote_dsts:
                return I.reduce_copy_send_packet if self.pkt_dsts else I.reduce_send_packet
            return I.reduce_copy_packet if self.pkt_dsts else I.reduce_packet
        return I.reduce_send if self.remote_dsts else I.reduce

    def accesses(self):
        # the first source of a packet reduce is the accumulator in plain form; the others are
        # packets, tracked too (as the reference compiler does)
        reads = self.srcs[1:] if self.packet else self.srcs
        return [span(self.uid, r, "r") for r in reads] + [span(self.uid, w, "w") for w in self.dst]

    def relocate(self, move):
        for ref in self.srcs + self.dst + self.pkt_dsts + self.remote_srcs + self.remote_dsts:
            ref.index = move(ref.index, ref.size)

    def to_dict(self):
        d = {"name": self.code.value,
             "src_buff": [r.to_dict() for r in self.srcs + self.remote_srcs],
             "dst_buff": [r.to_dict() for r in self.dst + self.pkt_dsts + self.remote_dsts]}
        if self.channel_type != ChannelType.none:
            d["channel_type"] = self.channel_type.value
        d["reduce_op"] = self.reduce_op.value
        if self.group is not None:
            d["tbg_info"] = self.group.to_dict()
        return d
