"""Ring allreduce over memory channels, in place.

n-1 reduce-scatter steps: at step s rank r sends chunk (r - s) mod n into scratch slot s of the
next rank, which adds it into its own copy of that chunk (and sends the sum on at step s+1).
After them rank r holds the total of chunk (r + 1) mod n. Then n-1 allgather steps pass the
finished chunks around the ring, written straight into the next rank's buffer.
Every put is followed by a signal that the next rank waits for; one channel per neighbour pair
(with two ranks the next and the previous rank are the same peer, and share it).
Buffers: n chunks (x instances); scratch n-1 chunks."""
import argparse

from mscclpp.language.channel import MemoryChannel, SyncType
from mscclpp.language.collectives import AllReduce
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Buffer, Rank


def build(args):
    """The program for args.num_gpus ranks; returns the plan JSON text."""
    n = args.num_gpus
    with CollectiveProgram(args.name, AllReduce(n, 1, True), n, instances=args.instances, protocol="Simple",
                           num_threads_per_block=args.num_threads_per_block,
                           min_message_size=args.min_message_size, max_message_size=args.max_message_size):
        chans = {}

        def chan(src, dst):
            """The one channel from src to dst, made on first use (in rank order on both sides)."""
            if (src, dst) not in chans:
                chans[src, dst] = MemoryChannel(dst, src)
            return chans[src, dst]

        for r in range(n):  # make each rank's channels to next, then previous, in the same order
            chan(r, (r + 1) % n), chan(r, (r - 1) % n)
        scratch = [Buffer(r, n - 1) for r in range(n)]
        buf = [Rank(r).get_input_buffer() for r in range(n)]

        def step(r, c, dst_chunk):
            """Rank r sends its chunk c to dst_chunk on the next rank and tells it so."""
            nxt = (r + 1) % n
            chan(r, nxt).put(dst_chunk, buf[r][c:c + 1], tb=0)
            chan(r, nxt).signal(tb=0, data_sync=SyncType.before)

        def arrived(r):
            """Rank r waits for its previous rank's latest put."""
            chan(r, (r - 1) % n).wait(tb=0, data_sync=SyncType.after)

        for s in range(n - 1):
            for r in range(n):
                step(r, (r - s) % n, scratch[(r + 1) % n][s:s + 1])
            for r in range(n):
                c = (r - 1 - s) % n
                arrived(r)
                Rank(r).reduce(buf[r][c:c + 1], [scratch[r][s:s + 1]], tb=0)
        for s in range(n - 1):
            for r in range(n):
                c = (r + 1 - s) % n
                step(r, c, buf[(r + 1) % n][c:c + 1])
            for r in range(n):
                arrived(r)
        return JSON()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="allreduce_ring")
    ap.add_argument("--num_gpus", "--num_ranks", dest="num_gpus", type=int, default=4)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--num_threads_per_block", type=int, default=1024)
    ap.add_argument("--min_message_size", type=int, default=0)
    ap.add_argument("--max_message_size", type=int, default=2**64 - 1)
    print(build(ap.parse_args()))


if __name__ == "__main__":
    main()
