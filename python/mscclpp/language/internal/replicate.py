"""Instance replication: every thread block (and GPU channel, switch channel, semaphore) is cloned
`n` times; clone k of block b is block b*n+k, uses channel c*n+k for channel c, and works on
chunk index*n + k*size (interleaved policy) for each chunk range (index, size) of the original."""
import copy

from mscclpp.language.errors import DSLError
from mscclpp.language.internal.types import ReplicationPolicy


def chunk_mover(policy: ReplicationPolicy, n: int):
    """f(instance) -> move(index, size): where instance `instance` finds a chunk range."""
    if ReplicationPolicy(str(policy)) == ReplicationPolicy.interleaved:
        return lambda k: (lambda index, size: index * n + k * size)
    if n == 1:
        return lambda k: (lambda index, size: index)
    raise DSLError(f"replication policy {policy} cannot replicate {n} instances")


def instance_ops(ops, n: int, k: int, move_chunks) -> list:
    """Clone k (of n) of a block's compiled ops: chunks moved, per-GPU ids renumbered."""
    clone = copy.deepcopy(ops)
    for op in clone:
        op.relocate(move_chunks(k))
        op.renumber(lambda v: v * n + k)
    return clone


def block_dict(block, n: int, k: int, ops) -> dict:
    """The plan dict of clone k of `block`, whose ops are `ops`."""
    return {
        "id": block.id * n + k,
        "ops": [op.to_dict() for op in ops],
        "channels": [{"channel_type": t.value, "channel_ids": [c * n + k for c in ids]}
                     for t, ids in block.channels.items() if ids],
        "remote_buffer_refs": [{"access_channel_type": t.value, "remote_buffer_ids": list(ids)}
                               for t, ids in block.remote_refs.items()],
    }


def repeat_each(items, n: int) -> list:
    """[a, b] -> [a]*n + [b]*n: per-GPU resources of the n instances, clones side by side."""
    return [item for item in items for _ in range(n)]
