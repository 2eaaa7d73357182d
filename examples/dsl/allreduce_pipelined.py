"""Pipelined two-shot allreduce over memory channels, out of place, zero copy.

Rank r owns chunk r. Inside a LoopIterationContext the ops run once per `--unit` bytes of the
chunk: copy this rank's part into its output, add every peer's part read from the peer's input,
and write the sum into every peer's output; the compiler turns the loop into one `pipeline` op.
Relaxed signal/wait rounds before and after the loop keep the ranks' buffers in step.
Buffers: input and output n chunks (x instances); no scratch."""
import argparse

from mscclpp.language.channel import MemoryChannel, SyncType
from mscclpp.language.collectives import AllReduce
from mscclpp.language.general import JSON
from mscclpp.language.loop import LoopIterationContext
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Rank


def build(args):
    """The program for args.num_gpus ranks; returns the plan JSON text."""
    n = args.num_gpus
    with CollectiveProgram(args.name, AllReduce(n, 1, False), n, instances=args.instances, protocol="Simple",
                           num_threads_per_block=args.num_threads_per_block,
                           min_message_size=args.min_message_size, max_message_size=args.max_message_size):
        peers = {r: [p for p in range(n) if p != r] for r in range(n)}
        chan = {(r, p): MemoryChannel(p, r) for r in range(n) for p in peers[r]}
        for r in range(n):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            for p in peers[r]:
                chan[r, p].signal(tb=0, relaxed=True, data_sync=SyncType.none)
            for p in peers[r]:
                chan[r, p].wait(tb=0, relaxed=True, data_sync=SyncType.after)
            with LoopIterationContext(unit=args.unit, num_chunks=1):
                rank.copy(out[r:r + 1], inp[r:r + 1], tb=0)
                for p in peers[r]:  # one read-reduce of all peers once fused
                    chan[r, p].reduce(out[r:r + 1], [Rank(p).get_input_buffer()[r:r + 1]], tb=0)
                for p in peers[r]:
                    chan[r, p].put(Rank(p).get_output_buffer()[r:r + 1], out[r:r + 1], tb=0)
            for p in peers[r]:
                chan[r, p].signal(tb=0, relaxed=True, data_sync=SyncType.before)
            for p in peers[r]:
                chan[r, p].wait(tb=0, relaxed=True, data_sync=SyncType.none)
        return JSON()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="allreduce_pipelined")
    ap.add_argument("--num_gpus", "--num_ranks", dest="num_gpus", type=int, default=4)
    ap.add_argument("--unit", type=int, default=2**20, help="bytes of each chunk per loop iteration")
    ap.add_argument("--instances", type=int, default=1)
    ap.add_argument("--num_threads_per_block", type=int, default=1024)
    ap.add_argument("--min_message_size", type=int, default=0)
    ap.add_argument("--max_message_size", type=int, default=2**64 - 1)
    print(build(ap.parse_args()))


if __name__ == "__main__":
    main()
