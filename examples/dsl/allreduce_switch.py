"""Allreduce through a switch channel (NVLink multicast), in place.

Rank r owns chunks r*k .. r*k+k-1 (k = --blocks); block j of rank r load-reduces chunk r*k+j across
every rank's buffer through the switch and stores the sum back to all of them. Memory-channel
signal/wait rounds on block 0, with a barrier of all blocks after the first and before the last,
keep the ranks' buffers in step. Needs NVLink multicast: compiled and checked against its golden
plan only; CPU ranks cannot run it.
Buffers: n*k chunks (x instances); no scratch."""
import argparse

from mscclpp.language.channel import BufferType, MemoryChannel, SwitchChannel, SyncType
from mscclpp.language.collectives import AllReduce
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Rank


def build(args):
    """The program for args.num_gpus ranks; returns the plan JSON text."""
    n, k = args.num_gpus, args.blocks
    with CollectiveProgram(args.name, AllReduce(n, k, True), n, instances=args.instances, protocol="Simple",
                           num_threads_per_block=args.num_threads_per_block,
                           min_message_size=args.min_message_size, max_message_size=args.max_message_size):
        switch = SwitchChannel(rank_list=list(range(n)), buffer_type=BufferType.input)
        peers = {r: [p for p in range(n) if p != r] for r in range(n)}
        chan = {(r, p): MemoryChannel(p, r) for r in range(n) for p in peers[r]}

        def sync_round(r, first):
            """Block 0 of rank r signals every peer and waits for each of them."""
            for p in peers[r]:
                chan[r, p].signal(tb=0, relaxed=True, data_sync=SyncType.none if first else SyncType.before)
            for p in peers[r]:
                chan[r, p].wait(tb=0, relaxed=True, data_sync=SyncType.after if first else SyncType.none)

        for r in range(n):
            rank, buf = Rank(r), Rank(r).get_input_buffer()
            sync_round(r, True)
            rank.barrier(tb_list=list(range(k)))
            for j in range(k):
                c = r * k + j
                switch.at_rank(r).reduce(buffer_offset=c, size=1, dst_chunk=buf[c:c + 1], tb=j)
                switch.at_rank(r).broadcast(src_chunk=buf[c:c + 1], buffer_offset=c, size=1, tb=j)
            rank.barrier(tb_list=list(range(k)))
            sync_round(r, False)
        return JSON()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="allreduce_switch")
    ap.add_argument("--num_gpus", "--num_ranks", dest="num_gpus", type=int, default=4)
    ap.add_argument("--blocks", type=int, default=2, help="blocks (and chunks) per rank")
    ap.add_argument("--instances", type=int, default=1)
    ap.add_argument("--num_threads_per_block", type=int, default=1024)
    ap.add_argument("--min_message_size", type=int, default=0)
    ap.add_argument("--max_message_size", type=int, default=2**64 - 1)
    print(build(ap.parse_args()))


if __name__ == "__main__":
    main()
