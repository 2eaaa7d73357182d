"""All-pairs allreduce with LL packets, one shot, out of place.

Every rank writes its whole input as packets into its own slot of each peer's scratch; then each
rank reduces its input with the n-1 slots that arrived into its output, chunk by chunk, spinning on
the packets' flags instead of signal/wait. Double scratch keeps two launches from sharing slots.
Buffers: input and output of n chunks (x instances); scratch (n-1)*n chunks."""
import argparse

from mscclpp.language.channel import MemoryChannel
from mscclpp.language.collectives import AllReduce
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Buffer, Rank


def slot(src, dst):
    """Position of src among dst's peers (the slot src writes in dst's scratch)."""
    return src if src < dst else src - 1


def build(args):
    """The program for args.num_gpus ranks; returns the plan JSON text."""
    n = args.num_gpus
    with CollectiveProgram(args.name, AllReduce(n, 1, False), n, instances=args.instances, protocol="LL",
                           use_double_scratch_buffer=True, num_threads_per_block=args.num_threads_per_block,
                           min_message_size=args.min_message_size, max_message_size=args.max_message_size):
        scratch = [Buffer(r, (n - 1) * n) for r in range(n)]
        for r in range(n):
            inp = Rank(r).get_input_buffer()
            for p in range(n):
                if p != r:  # block slot(p, r) sends everything to p
                    s = slot(r, p) * n
                    MemoryChannel(p, r).put_packets(scratch[p][s:s + n], inp[0:n], tb=slot(p, r))
        for r in range(n):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            for c in range(n):  # chunk c is reduced by block c mod (n-1), after its sends
                arrived = [scratch[r][slot(p, r) * n + c:slot(p, r) * n + c + 1] for p in range(n) if p != r]
                rank.reduce(inp[c:c + 1], arrived, tb=c % (n - 1), dst_chunk=out[c:c + 1], packet=True)
        return JSON()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="allreduce_packets")
    ap.add_argument("--num_gpus", "--num_ranks", dest="num_gpus", type=int, default=4)
    ap.add_argument("--instances", type=int, default=1)
    ap.add_argument("--num_threads_per_block", type=int, default=1024)
    ap.add_argument("--min_message_size", type=int, default=0)
    ap.add_argument("--max_message_size", type=int, default=2**64 - 1)
    print(build(ap.parse_args()))


if __name__ == "__main__":
    main()
