"""Plans in the shape today's MSCCL++ DSL writes them (microsoft/mscclpp main 1f5f065), one or more
per difference from the older format the corpus was first written in (issue 17), so that none of
them can come back:

1. memory-channel data ops and switch ops carry no channel_ids: their peers are their buffer refs
   (buffer_id into remote_buffer_refs, switch_channel_id);
2. fused puts: several sources, source i to destination i (put, ppkt);
3. gstorepkt stores packets already in scratch;
4. ppkt over a port channel copies scratch already in packet form;
5. "name": null;
6. a test plan whose input and output chunk counts differ;
7. tbg slices of three blocks at chunk offsets where a sum of widths rounds past the next start.

gen_plans.py adds GOOD to its corpus and BAD to its bad plans."""
import copy

import gen_plans as gp
from gen_plans import Gpu, loc, peers, plan

# Ops whose peers come from their buffer refs when they run over memory channels.
MEMORY_DATA_OPS = {"put", "get", "re", "res", "rre", "rres", "ppkt", "rppkt", "respkt", "recspkt"}
SWITCH_OPS = {"glre", "glres", "gstore", "gstorepkt"}


def rref(t, ct, rank, btype, index, size=1):
    """A remote buffer reference as the DSL writes it (buffer_id, index, size; no rank)."""
    r = t.rb(ct, rank, btype, index, size)
    r.pop("rank")
    return r


def without_channel_ids(p, suffix="_dsl"):
    """p with channel_ids dropped where the DSL writes none (memory data ops, switch ops)."""
    q = copy.deepcopy(p)
    q["name"] += suffix
    for g in q["gpus"]:
        for tb in g["threadblocks"]:
            for op in tb["ops"] + [o for top in tb["ops"] for o in top.get("ops", [])]:
                memory_data = op["name"] in MEMORY_DATA_OPS and op.get("channel_type") == "memory"
                if memory_data or op["name"] in SWITCH_OPS:
                    op.pop("channel_ids", None)
                for ref in op.get("src_buff", []) + op.get("dst_buff", []):
                    ref.pop("rank", None)
    return q


def allgather_fused_put(n):
    """All-pairs allgather as the DSL fuses it: one put with the input once per peer, source i to
    peer i's output, between relaxed entry and release exit rounds."""
    gs = []
    for r in range(n):
        g = Gpu(r, 1, n, 0)
        t = g.tb()
        allc = [t.ch("memory", p) for p in peers(n, r)]
        t.op("rlxsignal", channel_type="memory", channel_ids=allc)
        t.op("rlxwait", channel_type="memory", channel_ids=allc)
        t.op("copy", src_buff=[loc("i", 0)], dst_buff=[loc("o", r)])
        t.op("put", channel_type="memory", src_buff=[loc("i", 0) for _ in peers(n, r)],
             dst_buff=[rref(t, "memory", p, "o", r) for p in peers(n, r)])
        t.op("signal", channel_type="memory", channel_ids=allc)
        t.op("wait", channel_type="memory", channel_ids=allc)
        gs.append(g)
    return plan("dsl_allgather_fused_put_n%d" % n, "allgather", gs)


def allreduce_fused_ppkt(n):
    """LL allreduce in the shape of the DSL's allreduce_naivy: one fused ppkt sends chunk p of the
    input to peer p (source i to destination i); respkt reduces the peers' packets into the output
    and sends the result as packets to every peer, where upkt unpacks it."""
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, 2 * n)
        t = g.tb()
        ps = peers(n, r)
        t.op("ppkt", channel_type="memory", src_buff=[loc("i", p) for p in ps],
             dst_buff=[rref(t, "memory", p, "s", r) for p in ps])
        t.op("respkt", channel_type="memory", reduce_op="sum", src_buff=[loc("i", r)] + [loc("s", p) for p in ps],
             dst_buff=[loc("o", r)] + [rref(t, "memory", p, "s", n + r) for p in ps])
        for p in ps:
            t.op("upkt", src_buff=[loc("s", n + p)], dst_buff=[loc("o", p)])
        gs.append(g)
    return plan("dsl_allreduce_fused_ppkt_n%d" % n, "allreduce", gs, protocol="LL", use_double_scratch_buffer=True)


def allreduce_port_ppkt(n):
    """LL allreduce whose packets cross port channels as the DSL's multi-node programs send them:
    cpkt packs the input into local scratch, then one fused ppkt over port channels copies those
    packets (already made, no repacking) to every peer; repkt reduces them there."""
    gs = []
    for r in range(n):
        g = Gpu(r, 1, 1, n)
        t = g.tb()
        ps = peers(n, r)
        t.op("cpkt", src_buff=[loc("i", 0)], dst_buff=[loc("s", r)])
        t.op("ppkt", channel_type="port", channel_ids=[t.ch("port", p) for p in ps],
             src_buff=[loc("s", r) for _ in ps], dst_buff=[rref(t, "port", p, "s", r) for p in ps])
        t.op("repkt", reduce_op="sum", src_buff=[loc("i", 0)] + [loc("s", p) for p in ps], dst_buff=[loc("o", 0)])
        gs.append(g)
    return plan("dsl_allreduce_port_ppkt_n%d" % n, "allreduce", gs, protocol="LL", use_double_scratch_buffer=True)


def allgather_tbg3(n):
    """Allgather whose copy and puts are split over three blocks (tbg_size 3) at chunk offsets 2r:
    slices that must partition their range exactly (at offset 4 and 6, start + width rounds an ulp
    past the next slice's start). Each block has its own channel to each peer."""
    gs = []
    for r in range(n):
        g = Gpu(r, 2, 2 * n, 0)
        for b in range(3):
            t = g.tb()
            allc = [t.ch("memory", p, b) for p in peers(n, r)]
            tbg = {"tb_id": b, "tbg_size": 3}
            t.op("signal", channel_type="memory", channel_ids=allc)
            t.op("wait", channel_type="memory", channel_ids=allc)
            t.op("copy", src_buff=[loc("i", 0, 2)], dst_buff=[loc("o", 2 * r, 2)], tbg_info=tbg)
            t.op("put", channel_type="memory", src_buff=[loc("i", 0, 2) for _ in peers(n, r)],
                 dst_buff=[rref(t, "memory", p, "o", 2 * r, 2) for p in peers(n, r)], tbg_info=tbg)
            t.op("signal", channel_type="memory", channel_ids=allc)
            t.op("wait", channel_type="memory", channel_ids=allc)
        gs.append(g)
    return plan("dsl_allgather_tbg3_n%d" % n, "allgather", gs)


def null_name(p):
    """p with "name": null (a DSL program given no name); loaded, it is named after its file."""
    q = copy.deepcopy(p)
    q["name"] = None
    return q


def test_plan_in_out(n):
    """A test plan (no collective to check) with 1 input chunk and 2 output chunks per rank."""
    gs = []
    for r in range(n):
        g = Gpu(r, 1, 2, 0)
        t = g.tb()
        t.op("copy", src_buff=[loc("i", 0)], dst_buff=[loc("o", 0)])
        t.op("copy", src_buff=[loc("i", 0)], dst_buff=[loc("o", 1)])
        gs.append(g)
    return plan("dsl_test_in1_out2_n%d" % n, "test", gs)


def goods():
    """(plan, ranks, sizes, file name) of the DSL-shaped plans."""
    named = null_name(allgather_fused_put(3))
    return [
        (without_channel_ids(gp.allreduce_allpairs(4)), 4, "4096,1000", None),
        (without_channel_ids(gp.allreduce_rre(4)), 4, "4096,1000", None),
        (without_channel_ids(gp.allreduce_ll_recpkt(4)), 4, "4096,1000", None),
        (without_channel_ids(gp.allreduce_switch(4, False)), 4, "4096,1000", None),
        (without_channel_ids(gp.allreduce_switch(4, True)), 4, "4096,1000", None),
        (without_channel_ids(gp.allgather_switch_ll(4)), 4, "4096,1000", None),
        (allgather_fused_put(4), 4, "4096,1000", None),
        (allreduce_fused_ppkt(4), 4, "4096,1024", None),
        (allreduce_port_ppkt(2), 2, "4096,1000", None),
        (allreduce_port_ppkt(4), 4, "4096,1000", None),
        (allgather_tbg3(4), 4, "4800,4096,96", None),
        (named, 3, "4096,1000", "dsl_null_name_n3"),
        (test_plan_in_out(2), 2, "4096,1000", None),
    ]


def bads():
    """(name, plan, substring of the loader's error) for what the DSL's format allows but means
    nothing: they are refused at load naming the gpu, block, op and field."""
    out = []
    p = allreduce_port_ppkt(2)
    p["gpus"][0]["threadblocks"][0]["ops"][1].pop("channel_ids")
    out.append(("bad_port_put_no_channel", p, "ppkt over port channels needs at least one channel"))
    p = allreduce_port_ppkt(2)
    p["gpus"][1]["threadblocks"][0]["ops"][1]["src_buff"] = [loc("i", 0)]
    out.append(("bad_port_ppkt_from_input", p, "gpu 1 threadblock 0 op 1: field 'src_buff': entry 0 of ppkt over a port "
                                                "channel is not scratch"))
    p = allgather_fused_put(4)
    p["gpus"][0]["threadblocks"][0]["ops"][3]["src_buff"].pop()
    out.append(("bad_fused_put_pairs", p, "put has 2 sources and 3 destinations"))
    p = gp.allgather_switch_ll(4)
    p["gpus"][1]["threadblocks"][0]["ops"][1]["src_buff"] = [loc("i", 0)]
    out.append(("bad_gstorepkt_from_input", p, "gpu 1 threadblock 0 op 1: field 'src_buff': entry 0 of gstorepkt holds "
                                                "packets and must be scratch"))
    p = allreduce_fused_ppkt(3)
    del p["gpus"][2]["threadblocks"][0]["ops"][0]  # gpu 2's packets never come: gpu 0 and 1 would wait for ever
    out.append(("bad_packets_nobody_writes", p, "waits for packets in scratch that no op writes, so every call would "
                                                 "hang"))
    return out
