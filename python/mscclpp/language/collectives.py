"""Collectives: the buffers each rank starts with (input / output chunk counts) and the plan's
`collective` name."""
from mscclpp.language.internal.types import BufferType
from mscclpp.language.rank import BaseBuffer

__all__ = ["Collective", "TestCollective", "AllGather", "AllReduce", "ReduceScatter", "AllToAll", "SendRecv",
           "BufferType"]


class Collective:
    """Base: `num_ranks` ranks, `chunk_factor` chunks per rank share, `inplace` calls."""

    name = "custom"

    def __init__(self, num_ranks: int, chunk_factor: int, inplace: bool):
        self.num_ranks, self.chunk_factor, self.inplace = num_ranks, chunk_factor, inplace
        self.name = type(self).name

    def chunk_counts(self):
        """(input chunks, output chunks) of every rank."""
        raise NotImplementedError

    def init_buffers(self):
        """Per rank, {BufferType.input: ..., BufferType.output: ...} buffers of chunk_counts()."""
        counts = self.chunk_counts()
        return [{BufferType.input: BaseBuffer(r, BufferType.input, 0, counts[0]),
                 BufferType.output: BaseBuffer(r, BufferType.output, 0, counts[1])} for r in range(self.num_ranks)]

    def check(self, prog):
        pass


class TestCollective(Collective):
    """A collective of given buffer sizes, for testing single ops (`collective` "test")."""

    name = "test"
    __test__ = False  # not a pytest test class

    def __init__(self, num_ranks: int, input_size: int, output_size: int):
        super().__init__(num_ranks, 1, False)
        self.input_size, self.output_size = input_size, output_size

    def chunk_counts(self):
        return self.input_size, self.output_size


class AllGather(Collective):
    name = "allgather"

    def chunk_counts(self):
        return self.chunk_factor, self.num_ranks * self.chunk_factor


class AllReduce(Collective):
    name = "allreduce"

    def chunk_counts(self):
        return self.num_ranks * self.chunk_factor, self.num_ranks * self.chunk_factor


class ReduceScatter(Collective):
    name = "reducescatter"

    def chunk_counts(self):
        return self.num_ranks * self.chunk_factor, self.chunk_factor


class AllToAll(Collective):
    name = "alltoall"

    def chunk_counts(self):
        return self.num_ranks * self.chunk_factor, self.num_ranks * self.chunk_factor


class SendRecv(Collective):
    name = "sendrecv"

    def chunk_counts(self):
        return self.chunk_factor, self.chunk_factor
