"""Reduce-scatter through scratch, in place, over memory channels.

One block per peer p: a relaxed signal/wait round (p has finished the last call, so its scratch is
free), then put input chunk p into this rank's slot of p's scratch, signal, and wait for p's chunk
to land here. A barrier joins the peer blocks, and all of them (a thread block group) sum the input
chunk of this rank with the n-1 arrived ones into the output, which in place is that input chunk.
Buffers: input n chunks, output 1 (x instances); scratch n-1 chunks."""
import argparse

from mscclpp.language.channel import MemoryChannel, SyncType
from mscclpp.language.collectives import ReduceScatter
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Buffer, Rank
from mscclpp.language.thread_block_group import ThreadBlockGroup


def slot(src, dst):
    """Position of src among dst's peers (the slot src writes in dst's scratch)."""
    return src if src < dst else src - 1


def build(args):
    """The program for args.num_gpus ranks; returns the plan JSON text."""
    n = args.num_gpus
    with CollectiveProgram(args.name, ReduceScatter(n, 1, True), n, instances=args.instances, protocol="Simple",
                           num_threads_per_block=args.num_threads_per_block,
                           min_message_size=args.min_message_size, max_message_size=args.max_message_size):
        scratch = [Buffer(r, n - 1) for r in range(n)]
        for r in range(n):
            inp = Rank(r).get_input_buffer()
            for p in range(n):
                if p == r:
                    continue
                tb, s = slot(p, r), slot(r, p)
                ch = MemoryChannel(p, r)
                ch.signal(tb=tb, relaxed=True, data_sync=SyncType.none)
                ch.wait(tb=tb, relaxed=True, data_sync=SyncType.after)
                ch.put(scratch[p][s:s + 1], inp[p:p + 1], tb=tb)
                ch.signal(tb=tb, data_sync=SyncType.before)
                ch.wait(tb=tb, data_sync=SyncType.none)
        for r in range(n):
            rank = Rank(r)
            blocks = list(range(n - 1))
            rank.barrier(tb_list=blocks)
            rank.reduce(rank.get_input_buffer()[r:r + 1], [scratch[r][s:s + 1] for s in range(n - 1)],
                        tb_group=ThreadBlockGroup(blocks), dst_chunk=rank.get_output_buffer()[0:1])
        return JSON()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="reducescatter")
    ap.add_argument("--num_gpus", "--num_ranks", dest="num_gpus", type=int, default=4)
    ap.add_argument("--instances", type=int, default=1)
    ap.add_argument("--num_threads_per_block", type=int, default=1024)
    ap.add_argument("--min_message_size", type=int, default=0)
    ap.add_argument("--max_message_size", type=int, default=2**64 - 1)
    print(build(ap.parse_args()))


if __name__ == "__main__":
    main()
