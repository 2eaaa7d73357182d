"""Argument checks and small helpers shared by the DSL calls that record ops."""
from mscclpp.language.errors import DSLError
from mscclpp.language.internal.refs import GroupInfo, LocalRef
from mscclpp.language.internal.types import BufferType, Chunk


def describe(chunk: Chunk) -> str:
    """`rank 1 input[2:3]`: a chunk as error messages name it."""
    name = {BufferType.input: "input", BufferType.output: "output", BufferType.scratch: "scratch"}.get(
        chunk.buffer, str(chunk.buffer))
    return f"rank {chunk.rank} {name}[{chunk.index}:{chunk.index + chunk.size}]"


def blocks_of(tb, tb_group, where: str):
    """The (thread block, group slice or None) pairs an op given `tb=` or `tb_group=` runs on."""
    if tb is not None:
        return [(tb, None)]
    if tb_group is not None:
        if not tb_group.numtb():
            raise DSLError(f"{where}: the thread block group is empty")
        return [(t, GroupInfo(tb_group.get_internal_id(t), tb_group.numtb())) for t in tb_group.tb_list]
    raise DSLError(f"{where}: give a thread block (tb=...) or a thread block group (tb_group=...)")


def check_chunk(prog, chunk, rank: int, role: str, where: str):
    """`chunk` is a chunk of `rank` that lies inside its buffer as allocated so far."""
    if not isinstance(chunk, Chunk):
        raise DSLError(f"{where}: the {role} must be a chunk (a buffer slice such as buf[0:1]), not {chunk!r}")
    if chunk.rank != rank:
        raise DSLError(f"{where}: the {role} {describe(chunk)} is not on rank {rank}")
    if chunk.index < 0 or chunk.size < 0 or chunk.index + chunk.size > prog.chunk_count(chunk.rank, chunk.buffer):
        raise DSLError(f"{where}: the {role} {describe(chunk)} is out of range: the buffer has "
                       f"{prog.chunk_count(chunk.rank, chunk.buffer)} chunks")


def check_same_size(a: Chunk, b: Chunk, where: str):
    if a.size != b.size:
        raise DSLError(f"{where}: {describe(a)} has {a.size} chunks but {describe(b)} has {b.size}")


def check_scratch(chunk: Chunk, role: str, where: str):
    if chunk.buffer != BufferType.scratch:
        raise DSLError(f"{where}: the {role} {describe(chunk)} must be a scratch chunk (packets live in scratch)")


def local_ref(chunk: Chunk) -> LocalRef:
    return LocalRef(chunk.buffer, chunk.index, chunk.size)
