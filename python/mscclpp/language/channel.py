"""Channels between ranks: MemoryChannel and PortChannel (one peer each) and SwitchChannel (a group
of ranks sharing a multicast buffer). Each call records ops on the channel's source rank."""
from typing import List

from mscclpp.language.errors import DSLError
from mscclpp.language.internal.globals import get_program
from mscclpp.language.internal.dataops import Reduce, Transfer
from mscclpp.language.internal.ops import ChannelSync
from mscclpp.language.internal.refs import Link, RemoteRef
from mscclpp.language.internal.switchops import SwitchReduce, SwitchStore
from mscclpp.language.internal.recording import blocks_of, check_chunk, check_same_size, check_scratch, local_ref
from mscclpp.language.internal.types import BufferType, ChannelType, Chunk, Instruction as I, RankGroup
from mscclpp.language.internal.types import ReduceOperationType, SyncType
from mscclpp.language.thread_block_group import ThreadBlockGroup

__all__ = ["MemoryChannel", "PortChannel", "SwitchChannel", "BufferType", "SyncType", "ReduceOperationType",
           "ChannelType", "Chunk", "RankGroup", "ThreadBlockGroup"]


class _PeerChannel:
    """A channel from `src_rank` to `dst_rank`; ops run on `src_rank`."""

    channel_type = ChannelType.none

    @classmethod
    def reset(cls):
        """Kept for compatibility: channel numbering is per program, nothing to reset."""

    def __init__(self, dst_rank: int, src_rank: int):
        prog = get_program()
        kind = self.channel_type.value
        prog.check_rank(src_rank, f"source rank of a {kind} channel")
        prog.check_rank(dst_rank, f"destination rank of a {kind} channel")
        if src_rank == dst_rank:
            raise DSLError(f"a {kind} channel needs two different ranks, got rank {src_rank} to itself")
        self.dst_rank, self.src_rank = dst_rank, src_rank
        self.channel_id, self._ordinal = prog.gpus[src_rank].add_channel(self.channel_type, dst_rank)

    def __repr__(self):
        return f"{type(self).__name__}(dst_rank={self.dst_rank}, src_rank={self.src_rank})"

    def _where(self, call: str) -> str:
        return f"{self} {call}"

    def _link(self, outgoing: bool) -> Link:
        ends = (self.src_rank, self.dst_rank) if outgoing else (self.dst_rank, self.src_rank)
        return Link(self.channel_type, ends[0], ends[1], self._ordinal)

    def _sync(self, code: I, tb, data_sync: SyncType, links=()):
        prog = get_program()
        slot = prog.gpus[self.src_rank].block(tb).channel_slot(self.channel_type, self.channel_id)
        prog.record(self.src_rank, tb, ChannelSync(code, self.channel_type, [slot], data_sync, links))

    def _signal(self, tb, data_sync, relaxed=False):
        self._sync(I.relaxed_signal if relaxed else I.signal, tb, data_sync, [self._link(True)])
        get_program().count_signal(self.src_rank, self.dst_rank, self.channel_type)

    def _wait(self, tb, data_sync, relaxed=False):
        self._sync(I.relaxed_wait if relaxed else I.wait, tb, data_sync, [self._link(False)])
        get_program().count_signal(self.dst_rank, self.src_rank, self.channel_type, -1)

    def _check_put(self, dst_chunk, src_chunk, call, scratch_src=False, scratch_dst=False):
        prog, where = get_program(), self._where(call)
        check_chunk(prog, src_chunk, self.src_rank, "source", where)
        check_chunk(prog, dst_chunk, self.dst_rank, "destination", where)
        check_same_size(dst_chunk, src_chunk, where)
        if scratch_src:
            check_scratch(src_chunk, "source", where)
        if scratch_dst:
            check_scratch(dst_chunk, "destination", where)

    def _remote(self, block, chunk: Chunk) -> RemoteRef:
        """A reference to the peer's `chunk` through this block's remote buffer table."""
        gpu = get_program().gpus[self.src_rank]
        index = gpu.remote_buffer(chunk.rank, chunk.buffer, self.channel_type)
        return RemoteRef(chunk.buffer, chunk.index, chunk.size, block.remote_slot(self.channel_type, index), chunk.rank)

    def _move(self, code: I, local: Chunk, remote: Chunk, tb, tb_group, call, links=()):
        """Record a put-family op (local -> remote) or a get (remote -> local) on each block."""
        prog = get_program()
        for tb_id, group in blocks_of(tb, tb_group, self._where(call)):
            block = prog.gpus[self.src_rank].block(tb_id)
            ref = self._remote(block, remote)
            slot = block.channel_slot(self.channel_type, self.channel_id)
            srcs, dsts = ([ref], [local_ref(local)]) if code == I.get else ([local_ref(local)], [ref])
            prog.record(self.src_rank, tb_id, Transfer(code, srcs, dsts, self.channel_type, [slot], group, links))


class MemoryChannel(_PeerChannel):
    """Peer memory mapped into this rank: put, get, packets, and reads of peer chunks in reduce."""

    channel_type = ChannelType.memory

    def signal(self, tb: int, data_sync: SyncType = SyncType.both, relaxed: bool = False):
        self._signal(tb, data_sync, relaxed)

    def wait(self, tb: int, data_sync: SyncType = SyncType.both, relaxed: bool = False):
        self._wait(tb, data_sync, relaxed)

    def get(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int = None, tb_group: ThreadBlockGroup = None):
        prog, where = get_program(), self._where("get")
        check_chunk(prog, dst_chunk, self.src_rank, "destination", where)
        check_chunk(prog, src_chunk, self.dst_rank, "source", where)
        check_same_size(dst_chunk, src_chunk, where)
        self._move(I.get, dst_chunk, src_chunk, tb, tb_group, "get")

    def put(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int = None, tb_group: ThreadBlockGroup = None):
        self._check_put(dst_chunk, src_chunk, "put")
        self._move(I.put, src_chunk, dst_chunk, tb, tb_group, "put")

    def put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int = None, tb_group: ThreadBlockGroup = None):
        self._check_put(dst_chunk, src_chunk, "put_packets", scratch_dst=True)
        self._move(I.put_packet, src_chunk, dst_chunk, tb, tb_group, "put_packets")

    def read_put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int = None,
                         tb_group: ThreadBlockGroup = None):
        self._check_put(dst_chunk, src_chunk, "read_put_packets", scratch_src=True, scratch_dst=True)
        self._move(I.read_put_packet, src_chunk, dst_chunk, tb, tb_group, "read_put_packets")

    def reduce(self, local_src_chunk: Chunk, remote_src_chunks: List[Chunk], tb: int = None,
               tb_group: ThreadBlockGroup = None, local_dst_chunk: Chunk = None,
               reduce_op: ReduceOperationType = ReduceOperationType.sum):
        """local_dst = reduce(local_src, the peer's remote_src_chunks...) (rre)."""
        prog, where = get_program(), self._where("reduce")
        local_dst_chunk = local_src_chunk if local_dst_chunk is None else local_dst_chunk
        check_chunk(prog, local_src_chunk, self.src_rank, "local source", where)
        check_chunk(prog, local_dst_chunk, self.src_rank, "local destination", where)
        check_same_size(local_dst_chunk, local_src_chunk, where)
        if not remote_src_chunks:
            raise DSLError(f"{where}: no remote chunks to reduce")
        for chunk in remote_src_chunks:
            check_chunk(prog, chunk, self.dst_rank, "remote source", where)
            check_same_size(chunk, local_src_chunk, where)
        for tb_id, group in blocks_of(tb, tb_group, where):
            block = prog.gpus[self.src_rank].block(tb_id)
            remotes = [self._remote(block, c) for c in remote_src_chunks]
            block.channel_slot(self.channel_type, self.channel_id)
            op = Reduce([local_ref(local_src_chunk)], [local_ref(local_dst_chunk)], remote_srcs=remotes,
                        channel_type=self.channel_type, reduce_op=reduce_op, group=group)
            prog.record(self.src_rank, tb_id, op)


class PortChannel(_PeerChannel):
    """A proxy-driven channel (DMA or network): put, put with signal (and flush), packets, flush."""

    channel_type = ChannelType.port

    def signal(self, tb: int, data_sync: SyncType = SyncType.both):
        self._signal(tb, data_sync)

    def wait(self, tb: int, data_sync: SyncType = SyncType.both):
        self._wait(tb, data_sync)

    def flush(self, tb: int, data_sync: SyncType = SyncType.both):
        self._sync(I.flush, tb, data_sync)

    def put(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int):
        self._check_put(dst_chunk, src_chunk, "put")
        self._move(I.put, src_chunk, dst_chunk, tb, None, "put")

    def put_with_signal(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int):
        self._check_put(dst_chunk, src_chunk, "put_with_signal")
        self._move(I.put_with_signal, src_chunk, dst_chunk, tb, None, "put_with_signal", [self._link(True)])
        get_program().count_signal(self.src_rank, self.dst_rank, self.channel_type)

    def put_with_signal_and_flush(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int):
        self._check_put(dst_chunk, src_chunk, "put_with_signal_and_flush")
        self._move(I.put_with_signal_and_flush, src_chunk, dst_chunk, tb, None, "put_with_signal_and_flush",
                   [self._link(True)])
        get_program().count_signal(self.src_rank, self.dst_rank, self.channel_type)

    def put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int):
        """Send packets already made in scratch (copy_packets first) to the peer's scratch."""
        self._check_put(dst_chunk, src_chunk, "put_packets", scratch_src=True, scratch_dst=True)
        self._move(I.put_packet, src_chunk, dst_chunk, tb, None, "put_packets")

    def read_put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int = None,
                         tb_group: ThreadBlockGroup = None):
        self._check_put(dst_chunk, src_chunk, "read_put_packets", scratch_src=True, scratch_dst=True)
        self._move(I.read_put_packet, src_chunk, dst_chunk, tb, tb_group, "read_put_packets")


class SwitchChannel:
    """A multicast (NVLS) buffer of type `buffer_type` shared by `rank_list`; ops go through
    at_rank(r), which records them on rank r."""

    @classmethod
    def reset(cls):
        """Kept for compatibility: channel numbering is per program, nothing to reset."""

    def __init__(self, rank_list: List[int], buffer_type: BufferType):
        prog = get_program()
        ranks = list(rank_list)
        for r in ranks:
            prog.check_rank(r, "rank of a switch channel")
        if not ranks or len(set(ranks)) != len(ranks):
            raise DSLError(f"a switch channel needs distinct ranks, got {ranks}")
        self.channel_type = ChannelType.switch
        self.buffer_type = BufferType(buffer_type)
        self.rank_group = RankGroup(len(ranks), ranks)
        self.channel_ids = {r: prog.gpus[r].add_switch(self.buffer_type, self.rank_group) for r in ranks}

    def __repr__(self):
        return f"SwitchChannel(rank_list={self.rank_group.ranks}, buffer_type={self.buffer_type})"

    def at_rank(self, rank: int) -> "SwitchChannel.SwitchChannelRankView":
        if rank not in self.rank_group.ranks:
            raise DSLError(f"rank {rank} is not in {self}")
        return SwitchChannel.SwitchChannelRankView(self, rank)

    def _check_range(self, rank, buffer_offset, size, where):
        prog = get_program()
        if buffer_offset < 0 or size <= 0:
            raise DSLError(f"{where}: offset {buffer_offset} and size {size} do not name chunks")
        for r in self.rank_group.ranks:
            have = prog.chunk_count(r, self.buffer_type)
            if buffer_offset + size > have:
                raise DSLError(f"{where}: chunks [{buffer_offset}:{buffer_offset + size}] are out of range of "
                               f"rank {r}'s {self.buffer_type.name} buffer ({have} chunks)")

    def _local(self, rank, chunk, size, role, where):
        check_chunk(get_program(), chunk, rank, role, where)
        if chunk.size != size:
            raise DSLError(f"{where}: the {role} has {chunk.size} chunks, not {size}")

    def _slot(self, rank, tb):
        return get_program().gpus[rank].block(tb).channel_slot(ChannelType.switch, self.channel_ids[rank])

    def reduce(self, rank, buffer_offset, size, dst_chunk: Chunk, tb,
               reduce_op: ReduceOperationType = ReduceOperationType.sum):
        """dst_chunk = reduce over the group of chunks [buffer_offset, +size) (glre)."""
        where = f"{self} at rank {rank} reduce"
        self._local(rank, dst_chunk, size, "destination", where)
        self._check_range(rank, buffer_offset, size, where)
        dst = Chunk(dst_chunk.rank, dst_chunk.buffer, dst_chunk.index, dst_chunk.size)
        op = SwitchReduce(self.buffer_type, buffer_offset, size, dst, [self._slot(rank, tb)], reduce_op)
        get_program().record(rank, tb, op)

    def broadcast(self, rank, src_chunk: Chunk, buffer_offset, size, tb):
        """Store src_chunk to chunks [buffer_offset, +size) of every rank of the group (gstore)."""
        self._store(rank, src_chunk, buffer_offset, size, tb, False)

    def broadcast_packets(self, rank, src_chunk: Chunk, buffer_offset, size, tb):
        """As broadcast, for packets already in scratch, into scratch (gstorepkt)."""
        self._store(rank, src_chunk, buffer_offset, size, tb, True)

    def _store(self, rank, src_chunk, buffer_offset, size, tb, packet):
        where = f"{self} at rank {rank} broadcast{'_packets' if packet else ''}"
        self._local(rank, src_chunk, size, "source", where)
        if packet:
            check_scratch(src_chunk, "source", where)
            if self.buffer_type != BufferType.scratch:
                raise DSLError(f"{where}: packets can only be broadcast into a scratch switch buffer")
        self._check_range(rank, buffer_offset, size, where)
        src = Chunk(src_chunk.rank, src_chunk.buffer, src_chunk.index, src_chunk.size)
        op = SwitchStore(src, self.buffer_type, buffer_offset, size, [self._slot(rank, tb)], packet)
        op.group_ranks = list(self.rank_group.ranks)  # every rank's copy is written (checks only)
        get_program().record(rank, tb, op)

    class SwitchChannelRankView:
        """The switch channel's ops as run by one rank of its group."""

        def __init__(self, channel, rank):
            self._channel, self._rank = channel, rank

        def reduce(self, buffer_offset, size, dst_chunk: Chunk, tb,
                   reduce_op: ReduceOperationType = ReduceOperationType.sum):
            return self._channel.reduce(self._rank, buffer_offset, size, dst_chunk, tb, reduce_op)

        def broadcast(self, src_chunk: Chunk, buffer_offset, size, tb):
            return self._channel.broadcast(self._rank, src_chunk, buffer_offset, size, tb)

        def broadcast_packets(self, src_chunk: Chunk, buffer_offset, size, tb):
            return self._channel.broadcast_packets(self._rank, src_chunk, buffer_offset, size, tb)
