"""What a program records per rank and per thread block: ops and the resource tables they index.

Tables keep first-use order, which is the order the plan lists them in."""
from typing import Dict, List, Tuple

from mscclpp.language.errors import DSLError
from mscclpp.language.internal.types import BufferType, ChannelType, RankGroup


class BlockState:
    """One thread block: its ops, and its local tables of channels and remote buffers (per channel
    type, the GPU-level index of each entry; ops name entries by position)."""

    def __init__(self, tb_id: int):
        self.id = tb_id
        self.ops = []
        self.channels: Dict[ChannelType, List[int]] = {}
        self.remote_refs: Dict[ChannelType, List[int]] = {}

    def channel_slot(self, channel_type: ChannelType, gpu_index: int) -> int:
        return _slot(self.channels.setdefault(channel_type, []), gpu_index)

    def remote_slot(self, channel_type: ChannelType, buffer_index: int) -> int:
        return _slot(self.remote_refs.setdefault(channel_type, []), buffer_index)


def _slot(table: list, value: int) -> int:
    if value not in table:
        table.append(value)
    return table.index(value)


class RankState:
    """One GPU: chunk counts, blocks, channels, the peers' buffers it touches, semaphores, barriers."""

    def __init__(self, rank: int, input_chunks: int, output_chunks: int):
        self.rank = rank
        self.input_chunks, self.output_chunks, self.scratch_chunks = input_chunks, output_chunks, 0
        self.blocks: List[BlockState] = []
        self.peers: Dict[ChannelType, List[int]] = {}  # memory / port channels: the peer of each
        self.switches: List[Tuple[BufferType, RankGroup]] = []
        self.remote_buffers: Dict[Tuple[int, BufferType], Tuple[int, List[ChannelType]]] = {}
        self.semaphores: List[int] = []
        self.barriers: Dict[Tuple[int, ...], int] = {}

    def block(self, tb) -> BlockState:
        if not isinstance(tb, int) or isinstance(tb, bool) or tb < 0:
            raise DSLError(f"rank {self.rank}: thread block {tb!r} is not a non-negative integer")
        while len(self.blocks) <= tb:
            self.blocks.append(BlockState(len(self.blocks)))
        return self.blocks[tb]

    def add_channel(self, channel_type: ChannelType, peer: int) -> Tuple[int, int]:
        """A new memory / port channel to `peer`: (its index among this GPU's channels of the type,
        its ordinal among those to the same peer)."""
        peers = self.peers.setdefault(channel_type, [])
        peers.append(peer)
        return len(peers) - 1, peers.count(peer) - 1

    def add_switch(self, buffer_type: BufferType, group: RankGroup) -> int:
        self.switches.append((buffer_type, group))
        return len(self.switches) - 1

    def remote_buffer(self, owner: int, buffer_type: BufferType, access: ChannelType) -> int:
        """Index of `owner`'s buffer of `buffer_type` in this GPU's remote buffer list, noting that
        it is reached through channels of type `access`."""
        key = (owner, buffer_type)
        if key not in self.remote_buffers:
            self.remote_buffers[key] = (len(self.remote_buffers), [])
        index, accesses = self.remote_buffers[key]
        if access not in accesses:
            accesses.append(access)
        return index

    def barrier_id(self, tbs: List[int]) -> int:
        return self.barriers.setdefault(tuple(tbs), len(self.barriers))

    def add_semaphore(self, initial_value: int) -> int:
        self.semaphores.append(initial_value)
        return len(self.semaphores) - 1
