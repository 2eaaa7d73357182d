"""CollectiveProgram: the container a DSL program records into, and its plan (to_json)."""
import json
from collections import Counter

from mscclpp.language import channel as _channel, collectives as _collectives
from mscclpp.language.channel import *  # noqa: F401,F403 (re-exported: programs star-import this module)
from mscclpp.language.collectives import *  # noqa: F401,F403
from mscclpp.language.collectives import Collective
from mscclpp.language.errors import DSLError, SyncError
from mscclpp.language.internal import globals as _globals
from mscclpp.language.internal.compiler import build_plan
from mscclpp.language.internal.state import RankState
from mscclpp.language.internal.types import BufferType, ChannelType, ReplicationPolicy
from mscclpp.language.rank import Buffer, Rank, Semaphore  # noqa: F401
from mscclpp.language.utils import AlgoSpec

PROTOCOLS = ("Simple", "LL")
__all__ = (["CollectiveProgram", "AlgoSpec", "ReplicationPolicy", "Rank", "Buffer", "Semaphore"]
           + _channel.__all__ + _collectives.__all__)


class CollectiveProgram:
    """A collective algorithm for `num_ranks` GPUs; DSL calls inside `with` record into it."""

    def __init__(self, name: str, collective: Collective, num_ranks: int, instances: int = 1,
                 protocol: str = "Simple", instr_fusion: bool = True, auto_sync: bool = True,
                 replication_policy: ReplicationPolicy = ReplicationPolicy.interleaved,
                 reuse_resources: bool = False, num_threads_per_block: int = 1024,
                 use_double_scratch_buffer: bool = False, buffer_alignment: int = 16,
                 min_message_size: int = 0, max_message_size: int = 2**64 - 1):
        _check_settings(collective, num_ranks, instances, protocol, replication_policy)
        self.name, self.collective, self.num_ranks = name, collective, num_ranks
        self.instances, self.protocol = instances, protocol
        self.instr_fusion, self.auto_sync = instr_fusion, auto_sync
        self.replication_policy, self.reuse_resources = replication_policy, reuse_resources
        self.num_threads_per_block, self.use_double_scratch_buffer = num_threads_per_block, use_double_scratch_buffer
        self.buffer_alignment = buffer_alignment
        self.min_message_size, self.max_message_size = min_message_size, max_message_size
        self.buffers = collective.init_buffers()
        self.gpus = [RankState(r, self.buffers[r][BufferType.input].size, self.buffers[r][BufferType.output].size)
                     for r in range(num_ranks)]
        self.loop_context = None
        self.signal_balance = Counter()  # (sender, receiver, channel type) -> signals minus waits
        self._outer = None

    @classmethod
    def from_spec(cls, spec: AlgoSpec):
        return cls(spec.name, spec.collective, spec.world_size, instances=spec.instances, protocol=spec.protocol,
                   instr_fusion=spec.instr_fusion, auto_sync=spec.auto_sync,
                   replication_policy=spec.replication_policy, reuse_resources=spec.reuse_resources,
                   num_threads_per_block=spec.num_threads_per_block,
                   use_double_scratch_buffer=spec.use_double_scratch_buffer, buffer_alignment=spec.buffer_alignment,
                   min_message_size=spec.min_message_size, max_message_size=spec.max_message_size)

    def __enter__(self):
        self._outer = _globals._current
        _globals.set_program(self)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        _globals.set_program(self._outer)
        self._outer = None

    # --- recording (called by the DSL's public classes) ---

    def check_rank(self, rank, what: str):
        """`rank` is a rank of this program (else a DSLError naming it as `what`)."""
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < self.num_ranks:
            raise DSLError(f"{what} {rank!r} is out of range: the program has ranks 0..{self.num_ranks - 1}")

    def chunk_count(self, rank: int, buffer_type: BufferType) -> int:
        """Chunks of a rank's buffer (scratch: as allocated so far)."""
        if buffer_type == BufferType.scratch:
            return self.gpus[rank].scratch_chunks
        return self.buffers[rank][buffer_type].size

    def record(self, rank: int, tb: int, op):
        """Append `op` to block `tb` of `rank` (or to the open loop, which wraps it in a pipeline)."""
        block = self.gpus[rank].block(tb)
        if self.loop_context is not None:
            self.loop_context.add_operation(rank, tb, op)
        else:
            block.ops.append(op)

    def count_signal(self, sender: int, receiver: int, channel_type: ChannelType, n: int = 1):
        self.signal_balance[(sender, receiver, channel_type)] += n

    def set_loop_context(self, loop_context):
        if self.loop_context is not None and loop_context is not None:
            raise DSLError("a LoopIterationContext cannot be opened inside another one (no nested pipelines)")
        self.loop_context = loop_context

    # --- output ---

    def validate_signal_wait_pairing(self):
        """Per (sender, receiver, channel type): as many signals as waits (the finer checks, per
        channel pair and loop, run when the plan is built)."""
        for (sender, receiver, ctype), left in sorted(self.signal_balance.items(), key=str):
            if left:
                raise SyncError(f"{ctype.value} channels from rank {sender} to rank {receiver}: rank {sender} "
                                f"signals {abs(left)} time(s) {'more' if left > 0 else 'fewer'} than rank "
                                f"{receiver} waits for it; every signal needs one wait on the peer")

    def to_dict(self) -> dict:
        """The plan as a dict (after the checks; DSLError if the program cannot be planned)."""
        self.validate_signal_wait_pairing()
        return build_plan(self)

    def to_json(self, indent=2, **kwargs) -> str:
        """The execution plan. Recording is left untouched, so this may be called again."""
        return json.dumps(self.to_dict(), indent=indent, **kwargs)


def _check_settings(collective, num_ranks, instances, protocol, replication_policy):
    if protocol not in PROTOCOLS:
        raise DSLError(f"protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    if not isinstance(num_ranks, int) or num_ranks < 1:
        raise DSLError(f"num_ranks must be a positive integer, not {num_ranks!r}")
    if not isinstance(instances, int) or instances < 1:
        raise DSLError(f"instances must be a positive integer, not {instances!r}")
    if collective.num_ranks < num_ranks:
        raise DSLError(f"the collective is for {collective.num_ranks} ranks but the program for {num_ranks}")
    if ReplicationPolicy(str(replication_policy)) == ReplicationPolicy.none and instances > 1:
        raise DSLError("replication_policy none cannot replicate: use instances=1 or the interleaved policy")
