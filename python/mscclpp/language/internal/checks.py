"""Whole-program checks, so that no plan is written that the executor refuses or that hangs.

On the recorded ops: channels paired between ranks, ops inside loops no larger than the loop, packet
ops only in LL programs, every signal met by one wait on the same channel pair and loop. On the
compiled and replicated ops (what the plan holds; a loop body counts once): every packet read has
a writer, and every block can run to its end."""
from collections import Counter, defaultdict

from mscclpp.language.errors import DSLError, SyncError
from mscclpp.language.internal.loops import check_loops
from mscclpp.language.internal.ops import Barrier, Pipeline, SemaphoreOp
from mscclpp.language.internal.packets import check_packet_writers, check_protocol, packet_reads, packet_writes
from mscclpp.language.internal.types import ChannelType, Instruction as I

_SIGNALS = {I.signal, I.relaxed_signal, I.put_with_signal, I.put_with_signal_and_flush}
_WAITS = {I.wait, I.relaxed_wait}


def check_recorded(prog):
    check_channel_pairs(prog)
    check_loops(prog)
    check_protocol(prog)
    check_signal_balance({(g.rank, b.id): list(_steps(b.ops)) for g in prog.gpus for b in g.blocks})


def check_compiled(prog, compiled: dict):
    """`compiled`: (rank, tb) -> the block's ops as the plan holds them (passes and replication)."""
    steps = {key: list(_steps(ops)) for key, ops in compiled.items()}
    check_packet_writers(steps)
    check_progress(prog, steps)


def check_channel_pairs(prog):
    """As many channels of a type from r to q as from q to r (the executor pairs them in order)."""
    count = Counter()
    for gpu in prog.gpus:
        for ctype, peers in gpu.peers.items():
            for peer in peers:
                count[(ctype, gpu.rank, peer)] += 1
    for (ctype, r, q), n in sorted(count.items(), key=str):
        back = count.get((ctype, q, r), 0)
        if n != back:
            cls = "MemoryChannel" if ctype == ChannelType.memory else "PortChannel"
            raise DSLError(f"rank {r} has {n} {ctype.value} channel(s) to rank {q} but rank {q} has {back} to "
                           f"rank {r}: channels connect in pairs (the k-th of each side), so each needs a "
                           f"{cls}({r}, {q}) of rank {q} back")


def _steps(ops, loop=None):
    """(op, loop context) for each op of a block, loop bodies inlined once."""
    for op in ops:
        if isinstance(op, Pipeline):
            yield from _steps(op.ops, (op.unit_size, op.num_chunks))
        else:
            yield op, loop


def _links(op) -> list:
    return getattr(op, "links", [])


def check_signal_balance(steps):
    """Per channel pair (type, sender, receiver, ordinal) and loop: signals == waits."""
    balance, first = Counter(), {}
    for (rank, tb), ops in steps.items():
        for op, loop in ops:
            if op.code not in _SIGNALS | _WAITS:
                continue
            for link in _links(op):
                key = (link, loop)
                balance[key] += 1 if op.code in _SIGNALS else -1
                first.setdefault(key, (rank, tb))
    for (link, loop), left in balance.items():
        if left:
            rank, tb = first[(link, loop)]
            inside = f" inside a loop (unit {loop[0]}, {loop[1]} chunks)" if loop else ""
            raise SyncError(f"{link.channel_type.value} channel #{link.ordinal} from rank {link.sender} to rank "
                            f"{link.receiver}{inside}: {abs(left)} more {'signals' if left > 0 else 'waits'} than "
                            f"{'waits' if left > 0 else 'signals'} (first at rank {rank} thread block {tb}); the "
                            f"k-th channel of one side pairs with the k-th of the other, loops with equal loops")


def packet_needs(steps) -> dict:
    """(block, step) of a packet read -> the other (block, step)s writing packets it reads (it waits
    for all of them, as the executor's order check assumes)."""
    writers = defaultdict(set)
    for key, ops in steps.items():
        for i, (op, _) in enumerate(ops):
            for rank, index, size in packet_writes(key[0], op):
                for chunk in range(index, index + size):
                    writers[(rank, chunk)].add((key, i))
    needs = {}
    for key, ops in steps.items():
        for i, (op, _) in enumerate(ops):
            for ref in packet_reads(op):
                ws = {w for c in range(ref.index, ref.index + ref.size) for w in writers[(key[0], c)]} - {(key, i)}
                if ws:
                    needs.setdefault((key, i), set()).update(ws)
    return needs


class _Sim:
    """Blocks run as far as they can; a block stops at a wait with no signal left, a semaphore at 0,
    a barrier some of whose blocks have not arrived, or a packet read whose writers have not run."""

    def __init__(self, prog, steps):
        self.steps = steps
        self.at = {key: 0 for key in steps}
        self.needs = packet_needs(steps)
        self.signals = Counter()
        n = prog.instances
        self.sems = {(g.rank, i): g.semaphores[i // n] for g in prog.gpus for i in range(len(g.semaphores) * n)}
        self.arrived = defaultdict(set)  # (rank, barrier id, round) -> blocks there
        self.rounds = Counter()  # (rank, tb, barrier id) -> barriers of that id passed

    def try_step(self, key, op) -> bool:
        rank, tb = key
        if any(self.at[w] <= i for w, i in self.needs.get((key, self.at[key]), ())):
            return False
        if op.code in _SIGNALS:
            self.signals.update(_links(op))
        elif op.code in _WAITS:
            if any(not self.signals[link] for link in _links(op)):
                return False
            self.signals.subtract(_links(op))
        elif isinstance(op, SemaphoreOp):
            return self._semaphore(rank, op)
        elif isinstance(op, Barrier):
            meeting = (rank, op.barrier_id, self.rounds[(rank, tb, op.barrier_id)])
            self.arrived[meeting].add(tb)
            if len(self.arrived[meeting]) < len(op.tbs):
                return False
            self.rounds[(rank, tb, op.barrier_id)] += 1
        return True

    def _semaphore(self, rank, op) -> bool:
        keys = [(rank, i) for i in op.ids]
        if op.code == I.sem_release:
            self.sems.update({k: self.sems[k] + 1 for k in keys})
            return True
        if any(self.sems[k] == 0 for k in keys):
            return False
        self.sems.update({k: self.sems[k] - 1 for k in keys})
        return True

    def run(self):
        """The (block, op) of every block that cannot reach its end."""
        moved = True
        while moved:
            moved = False
            for key, ops in self.steps.items():
                while self.at[key] < len(ops) and self.try_step(key, ops[self.at[key]][0]):
                    self.at[key] += 1
                    moved = True
        return [(key, ops[self.at[key]][0]) for key, ops in self.steps.items() if self.at[key] < len(ops)]


def _waiters(steps) -> dict:
    """Link -> the blocks that wait on it."""
    out = defaultdict(set)
    for key, ops in steps.items():
        for op, _ in ops:
            if op.code in _WAITS:
                for link in _links(op):
                    out[link].add(key)
    return out


def _stuck_text(sim, key, op, waiters) -> str:
    rank, tb = key
    where = f"rank {rank} thread block {tb} at "
    if op.code in _WAITS:
        link = next(k for k in _links(op) if not sim.signals[k])
        text = (f"a wait on {link.channel_type.value} channel #{link.ordinal} from rank {link.sender} to rank "
                f"{link.receiver}")
        if len(waiters[link]) > 1:
            blocks = ", ".join(str(t) for _, t in sorted(waiters[link]))
            text += (f" (thread blocks {blocks} of rank {rank} all wait on this channel: which signal each one "
                     f"takes is a race)")
        return where + text
    if isinstance(op, Barrier):
        return where + f"barrier {op.barrier_id} of blocks {op.tbs}"
    if isinstance(op, SemaphoreOp):
        return where + f"{op.code.value} of semaphore(s) {op.ids}"
    unmet = sorted((w, j) for w, j in sim.needs.get((key, sim.at[key]), ()) if sim.at[w] <= j)
    writers = ", ".join(f"rank {w[0]} thread block {w[1]} ({sim.steps[w][j][0].code.value})" for w, j in unmet[:3])
    return where + (f"{op.code.value}, which reads packets also written by {writers}: a packet read waits for "
                    f"every write of its chunks in the call")


def check_progress(prog, steps):
    """Every block can run to its end (no circular waits, barriers every named block reaches,
    semaphores released before they are acquired, packets written before they are read)."""
    sim = _Sim(prog, steps)
    stuck = sim.run()
    if stuck:
        waiters = _waiters(steps)
        shown = "; ".join(_stuck_text(sim, k, op, waiters) for k, op in stuck[:4])
        more = f" (and {len(stuck) - 4} more blocks)" if len(stuck) > 4 else ""
        raise SyncError(f"the plan would hang: {shown}{more} would wait forever")
