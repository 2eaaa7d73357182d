"""Two-shot allreduce over memory channels, in place, zero copy.

Shot one (reduce-scatter): rank r reads chunk r of every peer's buffer and sums it into its own
chunk r. Shot two (allgather): it writes the finished chunk r into every peer's buffer. A relaxed
signal/wait round first makes sure every peer has entered the call (its buffer is ready to be read
and written); a final round keeps anyone from returning while a peer still writes to it.
Buffers: n chunks (x instances), no scratch."""
import argparse

from mscclpp.language.channel import MemoryChannel, SyncType
from mscclpp.language.collectives import AllReduce
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Rank


def build(args):
    """The program for args.num_gpus ranks; returns the plan JSON text."""
    n = args.num_gpus
    with CollectiveProgram(args.name, AllReduce(n, 1, True), n, instances=args.instances, protocol="Simple",
                           num_threads_per_block=args.num_threads_per_block,
                           min_message_size=args.min_message_size, max_message_size=args.max_message_size):
        peers = {r: [p for p in range(n) if p != r] for r in range(n)}
        chan = {(r, p): MemoryChannel(p, r) for r in range(n) for p in peers[r]}
        for r in range(n):
            for p in peers[r]:
                chan[r, p].signal(tb=0, relaxed=True, data_sync=SyncType.none)
            for p in peers[r]:
                chan[r, p].wait(tb=0, relaxed=True, data_sync=SyncType.after)
        for r in range(n):
            mine = Rank(r).get_input_buffer()[r:r + 1]
            for p in peers[r]:  # consecutive reduces of one chunk fuse into one multi-peer read-reduce
                chan[r, p].reduce(mine, [Rank(p).get_input_buffer()[r:r + 1]], tb=0)
            for p in peers[r]:
                chan[r, p].put(Rank(p).get_input_buffer()[r:r + 1], mine, tb=0)
        for r in range(n):
            for p in peers[r]:
                chan[r, p].signal(tb=0, data_sync=SyncType.before)
            for p in peers[r]:
                chan[r, p].wait(tb=0)
        return JSON()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="allreduce_two_shot")
    ap.add_argument("--num_gpus", "--num_ranks", dest="num_gpus", type=int, default=4)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--num_threads_per_block", type=int, default=1024)
    ap.add_argument("--min_message_size", type=int, default=0)
    ap.add_argument("--max_message_size", type=int, default=2**64 - 1)
    print(build(ap.parse_args()))


if __name__ == "__main__":
    main()
