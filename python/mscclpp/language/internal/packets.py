"""Packets: which scratch chunks each op reads and writes as packets, and the checks that packet
ops appear only in LL programs and that every chunk read as packets is written as packets by
another op (a packet reader spins until its packets arrive, so one nobody writes hangs forever)."""
from collections import defaultdict

from mscclpp.language.errors import DSLError, SyncError
from mscclpp.language.internal.dataops import Reduce, Transfer
from mscclpp.language.internal.ops import Pipeline
from mscclpp.language.internal.switchops import SwitchStore
from mscclpp.language.internal.types import ChannelType, Instruction as I

_PACKET_PUTS = {I.put_packet, I.read_put_packet}
PACKET_CODES = {I.copy_packet, I.unpack_packet, I.put_packet, I.read_put_packet, I.reduce_packet,
                I.reduce_send_packet, I.reduce_copy_packet, I.reduce_copy_send_packet, I.group_store_packet}
_PACKET_READS = {I.unpack_packet, I.read_put_packet}


def _flat(ops):
    for op in ops:
        if isinstance(op, Pipeline):
            yield from _flat(op.ops)
        else:
            yield op


def packet_writes(rank: int, op):
    """(rank, first chunk, size) of the scratch packets op writes."""
    if isinstance(op, Transfer) and op.code == I.copy_packet:
        return [(rank, r.index, r.size) for r in op.dsts]
    if isinstance(op, Transfer) and op.code in _PACKET_PUTS:
        return [(r.rank, r.index, r.size) for r in op.dsts]
    if isinstance(op, Reduce) and op.packet:
        return [(rank, r.index, r.size) for r in op.pkt_dsts] + [(r.rank, r.index, r.size) for r in op.remote_dsts]
    if isinstance(op, SwitchStore) and op.code == I.group_store_packet:
        return [(r, op.offset, op.size) for r in op.group_ranks]
    return []


def packet_reads(op):
    """The local scratch refs op reads as packets (a put_packets over a port channel sends packets
    already in scratch)."""
    if isinstance(op, Transfer) and (op.code in _PACKET_READS or (
            op.code == I.put_packet and op.channel_type == ChannelType.port)):
        return op.srcs
    if isinstance(op, Reduce) and op.packet:
        return op.srcs[1:]
    if isinstance(op, SwitchStore) and op.code == I.group_store_packet:
        return [op.src]
    return []


def check_protocol(prog):
    """Packet ops need the LL protocol (a Simple plan has no packet flags to wait on)."""
    if prog.protocol == "LL":
        return
    for gpu in prog.gpus:
        for block in gpu.blocks:
            for op in _flat(block.ops):
                if op.code in PACKET_CODES:
                    raise DSLError(f"rank {gpu.rank} thread block {block.id}: packet op {op.code.value} in a "
                                   f"program whose protocol is Simple (use protocol=\"LL\")")


def check_packet_writers(steps):
    """`steps`: (rank, tb) -> [(op, loop)] of the compiled blocks. Each packet read needs a writer
    other than the op itself."""
    written = defaultdict(set)  # (rank, chunk) -> the ops writing packets there
    for (rank, _), ops in steps.items():
        for op, _ in ops:
            for owner, index, size in packet_writes(rank, op):
                for chunk in range(index, index + size):
                    written[(owner, chunk)].add(id(op))
    for (rank, tb), ops in steps.items():
        for op, _ in ops:
            for ref in packet_reads(op):
                missing = [c for c in range(ref.index, ref.index + ref.size) if written[(rank, c)] - {id(op)} == set()]
                if missing:
                    raise SyncError(f"rank {rank} thread block {tb}: {op.code.value} reads packets from scratch "
                                    f"chunk {missing[0]}, which no other op of the program writes packets into, "
                                    f"so it would wait forever")
