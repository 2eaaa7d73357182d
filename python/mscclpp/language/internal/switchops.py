"""Switch (multicast) op records: glre, gstore / gstorepkt, glres."""
from mscclpp.language.internal.ops import Op
from mscclpp.language.internal.refs import Access, span
from mscclpp.language.internal.types import ChannelType, Chunk, Instruction as I


class SwitchReduce(Op):
    """glre: multimem load-reduce of `size` chunks at `offset` of the switch buffer into `dst`."""

    def __init__(self, buffer_type, offset, size, dst: Chunk, channel_ids, reduce_op):
        super().__init__(I.group_load_reduce)
        self.buffer_type, self.offset, self.size, self.dst = buffer_type, offset, size, dst
        self.channel_ids, self.reduce_op = list(channel_ids), reduce_op

    def accesses(self):
        # the multicast load reads this rank's copy of the switch buffer too
        return [Access(self.uid, self.buffer_type, self.offset, self.offset + self.size - 1, "r"),
                span(self.uid, self.dst, "w")]

    def relocate(self, move):
        self.offset = move(self.offset, self.size)
        self.dst.index = move(self.dst.index, self.size)

    def to_dict(self):
        return {"name": self.code.value, "buffer_type": self.buffer_type.value, "buffer_offset": self.offset,
                "size": self.size, "dst_chunk": self.dst.to_dict(), "channel_ids": list(self.channel_ids),
                "channel_type": ChannelType.switch.value, "reduce_op": self.reduce_op.value}


class SwitchStore(Op):
    """gstore / gstorepkt: multimem store of `src` to `offset` of the switch buffer on every rank."""

    def __init__(self, src: Chunk, buffer_type, offset, size, channel_ids, packet=False):
        super().__init__(I.group_store_packet if packet else I.group_store)
        self.src, self.buffer_type, self.offset, self.size = src, buffer_type, offset, size
        self.channel_ids = list(channel_ids)

    def accesses(self):
        if self.code == I.group_store_packet:
            return []  # packets in, packets out: their flags order them
        return [span(self.uid, self.src, "r"),
                Access(self.uid, self.buffer_type, self.offset, self.offset + self.size - 1, "w")]

    def relocate(self, move):
        self.offset = move(self.offset, self.size)
        self.src.index = move(self.src.index, self.size)

    def to_dict(self):
        return {"name": self.code.value, "src_buff": [self.src.to_dict()],
                "dst_buff": [{"switch_channel_id": self.channel_ids[0], "index": self.offset, "size": self.size}],
                "channel_type": ChannelType.switch.value}


class SwitchReduceStore(Op):
    """glres: multimem load-reduce at `src_offset` then store to all ranks at `dst_offset`."""

    def __init__(self, buffer_type, size, src_offset, dst_offset, channel_ids, reduce_op):
        super().__init__(I.group_load_reduce_store)
        self.buffer_type, self.size, self.src_offset, self.dst_offset = buffer_type, size, src_offset, dst_offset
        self.channel_ids, self.reduce_op = list(channel_ids), reduce_op

    def accesses(self):
        last = self.size - 1
        return [Access(self.uid, self.buffer_type, self.src_offset, self.src_offset + last, "r"),
                Access(self.uid, self.buffer_type, self.dst_offset, self.dst_offset + last, "w")]

    def relocate(self, move):
        self.src_offset = move(self.src_offset, self.size)
        self.dst_offset = move(self.dst_offset, self.size)

    def to_dict(self):
        ref = lambda index: {"switch_channel_id": self.channel_ids[0], "index": index, "size": self.size}
        return {"name": self.code.value, "src_buff": [ref(self.src_offset)], "dst_buff": [ref(self.dst_offset)],
                "channel_type": ChannelType.switch.value, "reduce_op": self.reduce_op.value}
