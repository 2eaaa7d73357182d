"""Enumerations and small value types shared by the DSL's public modules and its compiler."""
from dataclasses import dataclass
from enum import Enum
from typing import List


class _Bits(Enum):
    """An enum whose members are sets of flag bits, combined with | & ^."""

    def _bits(self):
        return type(self)._BITS[self.name]

    def _from(self, bits):
        return next(m for m in type(self) if m._bits() == bits)

    def __or__(self, other):
        return self._from(self._bits() | other._bits()) if type(other) is type(self) else NotImplemented

    def __and__(self, other):
        return self._from(self._bits() & other._bits()) if type(other) is type(self) else NotImplemented

    def __xor__(self, other):
        return self._from(self._bits() ^ other._bits()) if type(other) is type(self) else NotImplemented

    def __str__(self):
        return self.value


class SyncType(_Bits):
    """Where a block-wide barrier goes around a synchronizing op: none, before, after or both."""
    none = "none"
    before = "before"
    after = "after"
    both = "both"


SyncType._BITS = {"none": 0, "before": 1, "after": 2, "both": 3}


class _Named(Enum):
    def __str__(self):
        return self.value


class ReduceOperationType(_Named):
    sum = "sum"
    min = "min"
    max = "max"


class BufferType(_Named):
    input = "i"
    output = "o"
    scratch = "s"

    def __lt__(self, other):
        return self.value < other.value


class ChannelType(_Named):
    port = "port"
    memory = "memory"
    switch = "switch"
    none = "none"


class Instruction(_Named):
    """Op codes of the plan format."""
    nop = "nop"
    barrier = "barrier"
    copy = "copy"
    copy_packet = "cpkt"
    unpack_packet = "upkt"
    reduce = "re"
    reduce_packet = "repkt"
    reduce_copy_packet = "recpkt"
    reduce_send = "res"
    reduce_send_packet = "respkt"
    reduce_copy_send_packet = "recspkt"
    read_reduce = "rre"
    read_reduce_send = "rres"
    sem_acquire = "sem_acquire"
    sem_release = "sem_release"
    signal = "signal"
    wait = "wait"
    relaxed_signal = "rlxsignal"
    relaxed_wait = "rlxwait"
    flush = "flush"
    get = "get"
    put = "put"
    put_packet = "ppkt"
    read_put_packet = "rppkt"
    put_with_signal = "pws"
    put_with_signal_and_flush = "pwsf"
    group_store = "gstore"
    group_store_packet = "gstorepkt"
    group_load_reduce = "glre"
    group_load_reduce_store = "glres"
    pipeline = "pipeline"


class ReplicationPolicy(_Named):
    """How replicated instances lay out their chunks: interleaved (chunk i of instance k lands at
    i * instances + k, scaled by the chunk size), or none (one instance only)."""
    interleaved = "interleaved"
    none = "none"


@dataclass
class Chunk:
    """`size` consecutive chunks of one rank's buffer starting at chunk `index`."""
    rank: int
    buffer: BufferType
    index: int
    size: int

    def __hash__(self):
        return hash((self.rank, self.buffer, self.index, self.size))

    def to_dict(self):
        return {"rank": self.rank, "type": self.buffer.value, "index": self.index, "size": self.size}


@dataclass
class RankGroup:
    size: int
    ranks: List[int]

    def to_dict(self):
        return {"size": self.size, "ranks": list(self.ranks)}
