"""From a recorded program to the plan dict: checks of the recording; per thread block fusion,
block barriers for data_sync and dependency barriers; instance replication; checks of the result."""
import copy

from mscclpp.language.internal.blocksync import insert_block_barriers
from mscclpp.language.internal.checks import check_compiled, check_recorded
from mscclpp.language.internal.dependencies import order_accesses
from mscclpp.language.internal.fusion import fuse
from mscclpp.language.internal.replicate import block_dict, chunk_mover, instance_ops, repeat_each
from mscclpp.language.internal.types import ChannelType


def build_plan(prog) -> dict:
    check_recorded(prog)
    n, move = prog.instances, chunk_mover(prog.replication_policy, prog.instances)
    clones = {}  # (rank, block id, instance) -> ops
    for gpu in prog.gpus:
        for block in gpu.blocks:
            ops = compile_block(prog, block.ops)
            for k in range(n):
                clones[(gpu.rank, block.id, k)] = instance_ops(ops, n, k, move)
    check_compiled(prog, {(r, b * n + k): ops for (r, b, k), ops in clones.items()})
    return {
        "name": prog.name,
        "collective": prog.collective.name,
        "protocol": prog.protocol,
        "inplace": prog.collective.inplace,
        "reuse_resources": prog.reuse_resources,
        "gpus": [_build_gpu(prog, gpu, clones) for gpu in prog.gpus],
        "num_threads_per_block": prog.num_threads_per_block,
        "use_double_scratch_buffer": prog.use_double_scratch_buffer,
        "buffer_alignment": prog.buffer_alignment,
        "min_message_size": prog.min_message_size,
        "max_message_size": prog.max_message_size,
    }


def compile_block(prog, ops) -> list:
    """One block's recorded ops through the passes (on a copy: the recording stays as it was)."""
    ops = copy.deepcopy(ops)
    if prog.instr_fusion:
        ops = fuse(ops)
    ops = insert_block_barriers(ops)
    if prog.auto_sync:
        ops = order_accesses(ops)
    return ops


def _build_gpu(prog, gpu, clones: dict) -> dict:
    n = prog.instances
    blocks = [block_dict(b, n, k, clones[(gpu.rank, b.id, k)]) for b in gpu.blocks for k in range(n)]
    channels = [{"channel_type": t.value, "connected_to": repeat_each(peers, n)} for t, peers in gpu.peers.items()]
    channels += [{"channel_type": ChannelType.switch.value, "buffer_type": b.value, "rank_groups": [g.to_dict()]}
                 for b, g in repeat_each(gpu.switches, n)]
    remote = sorted(gpu.remote_buffers.items(), key=lambda item: item[1][0])
    return {
        "id": gpu.rank,
        "input_chunks": gpu.input_chunks * n,
        "output_chunks": gpu.output_chunks * n,
        "scratch_chunks": gpu.scratch_chunks * n,
        "threadblocks": blocks,
        "channels": channels,
        "remote_buffers": [{"rank": owner, "type": btype.value, "access_channel_types": [a.value for a in access]}
                           for (owner, btype), (_, access) in remote],
        "semaphores": [{"init_value": v} for v in repeat_each(gpu.semaphores, n)],
    }
