"""Allgather over port channels (proxy-driven copies), in place.

In place, a rank's input already is its slot of the output. One block per peer: a signal/wait
round (the peer's output may be written), then put-with-signal of this rank's slot into the same
slot of the peer's output, a wait for the peer's own put-with-signal here, and a flush so the
copy out of this rank's buffer has finished before the call returns.
Buffers: input 1 chunk, output n chunks (x instances); no scratch."""
import argparse

from mscclpp.language.channel import PortChannel, SyncType
from mscclpp.language.collectives import AllGather
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Rank


def build(args):
    """The program for args.num_gpus ranks; returns the plan JSON text."""
    n = args.num_gpus
    with CollectiveProgram(args.name, AllGather(n, 1, True), n, instances=args.instances, protocol="Simple",
                           num_threads_per_block=args.num_threads_per_block,
                           min_message_size=args.min_message_size, max_message_size=args.max_message_size):
        for r in range(n):
            mine = Rank(r).get_output_buffer()[r:r + 1]
            for tb, p in enumerate(q for q in range(n) if q != r):
                ch = PortChannel(p, r)
                ch.signal(tb=tb, data_sync=SyncType.none)
                ch.wait(tb=tb, data_sync=SyncType.after)
                ch.put_with_signal(Rank(p).get_output_buffer()[r:r + 1], mine, tb=tb)
                ch.wait(tb=tb, data_sync=SyncType.after)
                ch.flush(tb=tb, data_sync=SyncType.none)
        return JSON()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="allgather_port")
    ap.add_argument("--num_gpus", "--num_ranks", dest="num_gpus", type=int, default=4)
    ap.add_argument("--instances", type=int, default=1)
    ap.add_argument("--num_threads_per_block", type=int, default=1024)
    ap.add_argument("--min_message_size", type=int, default=0)
    ap.add_argument("--max_message_size", type=int, default=2**64 - 1)
    print(build(ap.parse_args()))


if __name__ == "__main__":
    main()
