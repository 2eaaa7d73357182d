"""Per-rank DSL objects: Rank (local copies, reductions, barriers), buffers sliced into chunks,
scratch Buffer allocation, and Semaphore (ordering between blocks of one GPU)."""
from typing import List

from mscclpp.language.errors import DSLError, DSLValueError
from mscclpp.language.internal.globals import get_program
from mscclpp.language.internal.dataops import Reduce, Transfer
from mscclpp.language.internal.ops import Barrier, Nop, SemaphoreOp
from mscclpp.language.internal.recording import blocks_of, check_chunk, check_same_size, check_scratch, local_ref
from mscclpp.language.internal.types import BufferType, ChannelType, Chunk, Instruction as I
from mscclpp.language.internal.types import ReduceOperationType, SyncType
from mscclpp.language.thread_block_group import ThreadBlockGroup

__all__ = ["Rank", "BaseBuffer", "Buffer", "Semaphore", "BufferType", "SyncType", "ReduceOperationType",
           "ChannelType", "Chunk", "ThreadBlockGroup"]


class Rank:
    """One GPU of the program; its methods record local ops."""

    def __init__(self, rank: int):
        get_program().check_rank(rank, "rank")
        self.rank = rank

    def __repr__(self):
        return f"Rank({self.rank})"

    def get_input_buffer(self) -> "BaseBuffer":
        return get_program().buffers[self.rank][BufferType.input]

    def get_output_buffer(self) -> "BaseBuffer":
        return get_program().buffers[self.rank][BufferType.output]

    def _copy(self, code: I, dst_chunk: Chunk, src_chunk: Chunk, tb, tb_group, call: str):
        prog, where = get_program(), f"{self} {call}"
        check_chunk(prog, src_chunk, self.rank, "source", where)
        check_chunk(prog, dst_chunk, self.rank, "destination", where)
        check_same_size(dst_chunk, src_chunk, where)
        if code == I.unpack_packet:
            check_scratch(src_chunk, "source", where)
        if code == I.copy_packet:
            check_scratch(dst_chunk, "destination", where)
        for tb_id, group in blocks_of(tb, tb_group, where):
            prog.record(self.rank, tb_id, Transfer(code, [local_ref(src_chunk)], [local_ref(dst_chunk)], group=group))

    def copy(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int = None, tb_group: ThreadBlockGroup = None):
        self._copy(I.copy, dst_chunk, src_chunk, tb, tb_group, "copy")

    def unpack_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int = None, tb_group: ThreadBlockGroup = None):
        """Packets in scratch (src_chunk) -> plain data (upkt)."""
        self._copy(I.unpack_packet, dst_chunk, src_chunk, tb, tb_group, "unpack_packets")

    def copy_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int = None, tb_group: ThreadBlockGroup = None):
        """Plain data -> packets in scratch (cpkt)."""
        self._copy(I.copy_packet, dst_chunk, src_chunk, tb, tb_group, "copy_packets")

    def reduce(self, src_chunk: Chunk, other_chunks: List[Chunk], tb: int = None, tb_group: ThreadBlockGroup = None,
               dst_chunk: Chunk = None, reduce_op: ReduceOperationType = ReduceOperationType.sum,
               packet: bool = False):
        """dst_chunk (default src_chunk) = reduce(src_chunk, *other_chunks); with packet=True the
        others are packets in scratch (repkt)."""
        prog, where = get_program(), f"{self} reduce"
        dst_chunk = src_chunk if dst_chunk is None else dst_chunk
        check_chunk(prog, src_chunk, self.rank, "source", where)
        check_chunk(prog, dst_chunk, self.rank, "destination", where)
        check_same_size(dst_chunk, src_chunk, where)
        if not other_chunks:
            raise DSLError(f"{where}: no other chunks to reduce with")
        for chunk in other_chunks:
            check_chunk(prog, chunk, self.rank, "other source", where)
            check_same_size(chunk, src_chunk, where)
            if packet:
                check_scratch(chunk, "other source", where)
        for tb_id, group in blocks_of(tb, tb_group, where):
            srcs = [local_ref(src_chunk)] + [local_ref(c) for c in other_chunks]
            op = Reduce(srcs, [local_ref(dst_chunk)], reduce_op=reduce_op, group=group, packet=packet)
            prog.record(self.rank, tb_id, op)

    def barrier(self, tb_list: List[int]):
        """All blocks of tb_list wait for each other (one block: a barrier of its own threads)."""
        prog, tbs = get_program(), list(tb_list)
        if not tbs:
            raise DSLError(f"{self} barrier: no thread blocks given")
        if len(set(tbs)) != len(tbs):
            raise DSLError(f"{self} barrier: thread blocks {tbs} repeat")
        if len(tbs) == 1:
            prog.record(self.rank, tbs[0], Nop())
            return
        barrier_id = prog.gpus[self.rank].barrier_id(tbs)
        for tb in tbs:
            prog.record(self.rank, tb, Barrier(barrier_id, tbs))


class BaseBuffer:
    """Chunks [offset, size) of one rank's buffer (`size` is the end, as in the reference); slicing
    is relative to `offset` and gives a Chunk."""

    def __init__(self, rank: int, buffer_type: BufferType, offset: int, size: int):
        self.rank, self.buffer_type, self.offset, self.size = rank, buffer_type, offset, offset + size

    def __len__(self):
        return self.size - self.offset

    def __repr__(self):
        return f"{type(self).__name__}(rank={self.rank}, {self.buffer_type.name}[{self.offset}:{self.size}])"

    def __getitem__(self, key) -> Chunk:
        if not isinstance(key, slice):
            raise TypeError(f"buffers are sliced into chunks (buf[a:b]), not indexed by {type(key).__name__}")
        if key.step not in (None, 1):
            raise DSLValueError(f"{self}: slices with a step are not chunks (step {key.step})")
        start = 0 if key.start is None else key.start
        stop = len(self) if key.stop is None else key.stop
        if start < 0 or stop < 0:
            raise DSLValueError(f"{self}: negative slice bounds [{key.start}:{key.stop}] are not supported")
        if start > stop:
            raise DSLValueError(f"{self}: slice start {start} is past its stop {stop}")
        if stop > len(self):
            raise DSLError(f"{self}: chunks [{start}:{stop}] are out of range (it has {len(self)} chunks)")
        return Chunk(self.rank, self.buffer_type, self.offset + start, stop - start)


class Buffer(BaseBuffer):
    """`size` new scratch chunks of `rank`, after those allocated before."""

    def __init__(self, rank: int, size: int):
        prog = get_program()
        prog.check_rank(rank, "rank of a scratch buffer")
        if not isinstance(size, int) or size < 0:
            raise DSLError(f"scratch buffer of rank {rank}: size {size!r} is not a chunk count")
        gpu = prog.gpus[rank]
        super().__init__(rank, BufferType.scratch, gpu.scratch_chunks, size)
        gpu.scratch_chunks += size


class Semaphore:
    """A counting semaphore of one GPU, for ordering its thread blocks."""

    @classmethod
    def reset(cls):
        """Kept for compatibility: semaphore numbering is per program, nothing to reset."""

    def __init__(self, rank: int, initial_value: int):
        prog = get_program()
        prog.check_rank(rank, "rank of a semaphore")
        if not isinstance(initial_value, int) or initial_value < 0:
            raise DSLError(f"semaphore of rank {rank}: initial value {initial_value!r} is not a count")
        self.rank, self.initial_value = rank, initial_value
        self.id = prog.gpus[rank].add_semaphore(initial_value)

    def acquire(self, tb: int, data_sync: SyncType = SyncType.both):
        get_program().record(self.rank, tb, SemaphoreOp(I.sem_acquire, [self.id], data_sync))

    def release(self, tb: int, data_sync: SyncType = SyncType.both):
        get_program().record(self.rank, tb, SemaphoreOp(I.sem_release, [self.id], data_sync))
