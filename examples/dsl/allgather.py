"""Allgather by pulling, out of place, over memory channels.

Each rank copies its own input into its slot of the output, and one block per peer reads that
peer's input straight into the peer's slot (get). Relaxed signal/wait pairs around the reads: the
first says "my input is ready", the last "I am done reading yours", so no rank returns (and lets its
input change) while a peer may still read it.
Buffers: input 1 chunk, output n chunks (x instances); no scratch."""
import argparse

from mscclpp.language.channel import MemoryChannel, SyncType
from mscclpp.language.collectives import AllGather
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Rank


def build(args):
    """The program for args.num_gpus ranks; returns the plan JSON text."""
    n = args.num_gpus
    with CollectiveProgram(args.name, AllGather(n, 1, False), n, instances=args.instances, protocol="Simple",
                           num_threads_per_block=args.num_threads_per_block,
                           min_message_size=args.min_message_size, max_message_size=args.max_message_size):
        for r in range(n):
            rank = Rank(r)
            out = rank.get_output_buffer()
            rank.copy(out[r:r + 1], rank.get_input_buffer()[0:1], tb=0)
            for tb, p in enumerate(q for q in range(n) if q != r):
                ch = MemoryChannel(p, r)
                ch.signal(tb=tb, relaxed=True, data_sync=SyncType.none)
                ch.wait(tb=tb, relaxed=True, data_sync=SyncType.after)
                ch.get(out[p:p + 1], Rank(p).get_input_buffer()[0:1], tb=tb)
                ch.signal(tb=tb, relaxed=True, data_sync=SyncType.before)
                ch.wait(tb=tb, relaxed=True, data_sync=SyncType.none)
        return JSON()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="allgather")
    ap.add_argument("--num_gpus", "--num_ranks", dest="num_gpus", type=int, default=4)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--num_threads_per_block", type=int, default=1024)
    ap.add_argument("--min_message_size", type=int, default=0)
    ap.add_argument("--max_message_size", type=int, default=2**64 - 1)
    print(build(ap.parse_args()))


if __name__ == "__main__":
    main()
