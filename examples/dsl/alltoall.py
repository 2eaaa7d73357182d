"""All-to-all by pushing, out of place, over memory channels.

Rank r's input chunk p belongs in slot r of rank p's output. One block per peer: a relaxed
signal/wait round (the peer is in this call, its output may be written), a put of the chunk
straight into the peer's output, a signal once it has landed, and a wait for the peer's chunk
here. One more block copies the rank's own chunk locally.
Buffers: input and output n chunks (x instances); no scratch."""
import argparse

from mscclpp.language.channel import MemoryChannel, SyncType
from mscclpp.language.collectives import AllToAll
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Rank


def build(args):
    """The program for args.num_gpus ranks; returns the plan JSON text."""
    n = args.num_gpus
    with CollectiveProgram(args.name, AllToAll(n, 1, False), n, instances=args.instances, protocol="Simple",
                           num_threads_per_block=args.num_threads_per_block,
                           min_message_size=args.min_message_size, max_message_size=args.max_message_size):
        for r in range(n):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            peers = [p for p in range(n) if p != r]
            for tb, p in enumerate(peers):
                ch = MemoryChannel(p, r)
                ch.signal(tb=tb, relaxed=True, data_sync=SyncType.none)
                ch.wait(tb=tb, relaxed=True, data_sync=SyncType.after)
                ch.put(Rank(p).get_output_buffer()[r:r + 1], inp[p:p + 1], tb=tb)
                ch.signal(tb=tb, data_sync=SyncType.before)
                ch.wait(tb=tb, data_sync=SyncType.none)
            rank.copy(out[r:r + 1], inp[r:r + 1], tb=len(peers))
        return JSON()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="alltoall")
    ap.add_argument("--num_gpus", "--num_ranks", dest="num_gpus", type=int, default=4)
    ap.add_argument("--instances", type=int, default=1)
    ap.add_argument("--num_threads_per_block", type=int, default=1024)
    ap.add_argument("--min_message_size", type=int, default=0)
    ap.add_argument("--max_message_size", type=int, default=2**64 - 1)
    print(build(ap.parse_args()))


if __name__ == "__main__":
    main()
