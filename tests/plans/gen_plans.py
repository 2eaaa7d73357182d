#!/usr/bin/env python3
"""The plan-conformance corpus: writes good plans (OUTDIR/*.json) and bad plans (OUTDIR/bad/*.json
with OUTDIR/bad/expect.tsv: file, substring the loader's error must contain).

    gen_plans.py OUTDIR
    gen_plans.py --perf OUTDIR   the performance plans, one folder per kind (OUTDIR/KIND/*.json for
                                 1-8 ranks), for MSCCLPP_PLAN_DIR=OUTDIR/KIND mscclpp-perf allreduce

Plans use the MSCCL++ executor's JSON schema (docs/plans.md). Written by hand here, no DSL."""
import copy
import json
import os
import sys


class Gpu:
    def __init__(self, rank, ic, oc, sc):
        self.d = {"id": rank, "input_chunks": ic, "output_chunks": oc, "scratch_chunks": sc,
                  "threadblocks": [], "channels": [], "remote_buffers": [], "semaphores": []}
        self.rank = rank
        self.chan_index = {}  # (type, peer) -> index among channels of that type
        self.count = {}
        self.rbufs = {}

    def chan(self, ctype, peer, k=0):
        key = (ctype, peer, k)  # k: the k-th channel of this type to peer (one per block in perf plans)
        if key not in self.chan_index:
            self.chan_index[key] = self.count.get(ctype, 0)
            self.count[ctype] = self.count.get(ctype, 0) + 1
            self.d["channels"].append({"channel_type": ctype, "connected_to": [peer]})
        return self.chan_index[key]

    def switch(self, btype, ranks):
        idx = self.count.get("switch", 0)
        self.count["switch"] = idx + 1
        self.d["channels"].append({"channel_type": "switch", "buffer_type": btype,
                                   "rank_groups": [{"size": len(ranks), "ranks": list(ranks)}]})
        return idx

    def rbuf(self, rank, btype, ctype):
        key = (rank, btype)
        if key not in self.rbufs:
            self.rbufs[key] = len(self.d["remote_buffers"])
            self.d["remote_buffers"].append({"rank": rank, "type": btype, "access_channel_types": [ctype]})
        rb = self.d["remote_buffers"][self.rbufs[key]]
        if ctype not in rb["access_channel_types"]:
            rb["access_channel_types"].append(ctype)
        return self.rbufs[key]

    def tb(self):
        t = TB(self, len(self.d["threadblocks"]))
        self.d["threadblocks"].append(t.d)
        return t

    def sem(self, init):
        self.d["semaphores"].append({"init_value": init})
        return len(self.d["semaphores"]) - 1


class TB:
    def __init__(self, gpu, tid):
        self.g = gpu
        self.d = {"id": tid, "ops": [], "channels": [], "remote_buffer_refs": []}
        self.local = {}  # ctype -> list of gpu channel ids
        self.rrefs = {}  # ctype -> list of gpu remote buffer ids

    def ch(self, ctype, peer, k=0):
        gid = self.g.chan(ctype, peer, k)
        lst = self.local.setdefault(ctype, [])
        if gid not in lst:
            lst.append(gid)
        self.d["channels"] = [{"channel_type": t, "channel_ids": l} for t, l in self.local.items()]
        return lst.index(gid)

    def sw(self, idx):
        lst = self.local.setdefault("switch", [])
        if idx not in lst:
            lst.append(idx)
        self.d["channels"] = [{"channel_type": t, "channel_ids": l} for t, l in self.local.items()]
        return lst.index(idx)

    def rb(self, ctype, rank, btype, index, size=1):
        gid = self.g.rbuf(rank, btype, ctype)
        lst = self.rrefs.setdefault(ctype, [])
        if gid not in lst:
            lst.append(gid)
        self.d["remote_buffer_refs"] = [{"access_channel_type": t, "remote_buffer_ids": l} for t, l in self.rrefs.items()]
        return {"buffer_id": lst.index(gid), "index": index, "size": size, "rank": rank}

    def op(self, name, **kw):
        o = {"name": name}
        o.update(kw)
        self.d["ops"].append(o)
        return o


def loc(btype, index, size=1):
    return {"type": btype, "index": index, "size": size}


def plan(name, coll, gpus, protocol="Simple", inplace=False, **extra):
    p = {"name": name, "collective": coll, "protocol": protocol, "inplace": inplace,
         "num_threads_per_block": 1024, "gpus": [g.d for g in gpus]}
    p.update(extra)
    return p


def peers(n, r):
    return [p for p in range(n) if p != r]


def entry_round(t, ct, ps):
    """Signal every peer in ps and wait for each: they have all started the call (their inputs are
    ready, their outputs free), so writing or reading their buffers next is ordered after their
    previous call (the order check, docs/plans.md). Zero-copy plans begin with it."""
    allc = [t.ch(ct, p) for p in ps]
    t.op("signal", channel_type=ct, channel_ids=allc)
    t.op("wait", channel_type=ct, channel_ids=allc)


# ---- allreduce -------------------------------------------------------------------------------

def allreduce_allpairs(n, ct="memory"):
    """Scratch all-pairs: chunk p to p's scratch, reduce own chunk, put the result to everyone."""
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, n)
        t = g.tb()
        for p in peers(n, r):
            t.op("put", channel_type=ct, channel_ids=[t.ch(ct, p)], src_buff=[loc("i", p)],
                 dst_buff=[t.rb(ct, p, "s", r)])
        allc = [t.ch(ct, p) for p in peers(n, r)]
        t.op("signal", channel_type=ct, channel_ids=allc)
        t.op("wait", channel_type=ct, channel_ids=allc)
        t.op("re", reduce_op="sum", src_buff=[loc("i", r)] + [loc("s", p) for p in peers(n, r)], dst_buff=[loc("o", r)])
        for p in peers(n, r):
            t.op("pws", channel_type=ct, channel_ids=[t.ch(ct, p)], src_buff=[loc("o", r)], dst_buff=[t.rb(ct, p, "o", r)])
        t.op("wait", channel_type=ct, channel_ids=allc)
        gs.append(g)
    return plan("allreduce_allpairs_%s_n%d" % (ct, n), "allreduce", gs)


def allreduce_allpairs_ll(n):
    """LL all-pairs: packets to peers' scratch, respkt sends the reduced chunk as packets, upkt."""
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, 2 * n)
        t = g.tb()
        for p in peers(n, r):
            t.op("ppkt", channel_type="memory", channel_ids=[t.ch("memory", p)], src_buff=[loc("i", p)],
                 dst_buff=[t.rb("memory", p, "s", r)])
        t.op("respkt", channel_type="memory", channel_ids=[t.ch("memory", p) for p in peers(n, r)], reduce_op="sum",
             src_buff=[loc("i", r)] + [loc("s", p) for p in peers(n, r)],
             dst_buff=[loc("o", r)] + [t.rb("memory", p, "s", n + r) for p in peers(n, r)])
        for p in peers(n, r):
            t.op("upkt", src_buff=[loc("s", n + p)], dst_buff=[loc("o", p)])
        gs.append(g)
    return plan("allreduce_allpairs_ll_n%d" % n, "allreduce", gs, protocol="LL", use_double_scratch_buffer=True)


def allreduce_ll_recs(n):
    """LL with recspkt: the reduced chunk goes as packets to peers and to a local packet copy."""
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, 2 * n)
        t = g.tb()
        for p in peers(n, r):
            t.op("ppkt", channel_type="memory", channel_ids=[t.ch("memory", p)], src_buff=[loc("i", p)],
                 dst_buff=[t.rb("memory", p, "s", r)])
        t.op("recspkt", channel_type="memory", channel_ids=[t.ch("memory", p) for p in peers(n, r)], reduce_op="sum",
             src_buff=[loc("i", r)] + [loc("s", p) for p in peers(n, r)],
             dst_buff=[loc("o", r), loc("s", n + r)] + [t.rb("memory", p, "s", n + r) for p in peers(n, r)])
        for p in range(n):
            t.op("upkt", src_buff=[loc("s", n + p)], dst_buff=[loc("o", p)])
        gs.append(g)
    return plan("allreduce_ll_recspkt_n%d" % n, "allreduce", gs, protocol="LL")


def allreduce_ll_recpkt(n):
    """LL with recpkt: the reduced chunk to the output and as packets to local scratch, which rppkt
    forwards to every peer's scratch; upkt unpacks the peers' results."""
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, 2 * n)
        t = g.tb()
        ps = peers(n, r)
        for p in ps:
            t.op("ppkt", channel_type="memory", channel_ids=[t.ch("memory", p)], src_buff=[loc("i", p)],
                 dst_buff=[t.rb("memory", p, "s", r)])
        t.op("recpkt", reduce_op="sum", src_buff=[loc("i", r)] + [loc("s", p) for p in ps],
             dst_buff=[loc("o", r), loc("s", n + r)])
        t.op("rppkt", channel_type="memory", channel_ids=[t.ch("memory", p) for p in ps], src_buff=[loc("s", n + r)],
             dst_buff=[t.rb("memory", p, "s", n + r) for p in ps])
        for p in ps:
            t.op("upkt", src_buff=[loc("s", n + p)], dst_buff=[loc("o", p)])
        gs.append(g)
    return plan("allreduce_ll_recpkt_n%d" % n, "allreduce", gs, protocol="LL", use_double_scratch_buffer=True)


def allreduce_res(n, ct):
    """All-pairs with res: chunk p to p's scratch, then res reduces the own chunk into the output and
    writes it to every peer's output; a signal round says the results arrived."""
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, n)
        t = g.tb()
        ps = peers(n, r)
        allc = [t.ch(ct, p) for p in ps]
        for p in ps:
            t.op("put", channel_type=ct, channel_ids=[t.ch(ct, p)], src_buff=[loc("i", p)],
                 dst_buff=[t.rb(ct, p, "s", r)])
        t.op("signal", channel_type=ct, channel_ids=allc)
        t.op("wait", channel_type=ct, channel_ids=allc)
        t.op("res", channel_type=ct, channel_ids=allc, reduce_op="sum",
             src_buff=[loc("i", r)] + [loc("s", p) for p in ps],
             dst_buff=[loc("o", r)] + [t.rb(ct, p, "o", r) for p in ps])
        t.op("signal", channel_type=ct, channel_ids=allc)
        t.op("wait", channel_type=ct, channel_ids=allc)
        gs.append(g)
    return plan("allreduce_res_%s_n%d" % (ct, n), "allreduce", gs)


def allreduce_ring(n, unit=192):
    """Ring reduce-scatter + allgather through scratch, every step pipelined in unit-byte pieces."""
    gs = []
    for r in range(n):
        nxt, prv = (r + 1) % n, (r - 1) % n
        g = Gpu(r, n, n, 2 * (n - 1))
        t = g.tb()
        cn, cp = t.ch("memory", nxt), t.ch("memory", prv)
        t.op("copy", src_buff=[loc("i", 0, n)], dst_buff=[loc("o", 0, n)])
        for k in range(n - 1):
            cs, cr = (r - k) % n, (r - k - 1) % n
            t.op("pipeline", iter_context={"unit_size": unit, "num_chunks": 1}, ops=[
                {"name": "put", "channel_type": "memory", "channel_ids": [cn], "src_buff": [loc("o", cs)],
                 "dst_buff": [t.rb("memory", nxt, "s", k)]},
                {"name": "signal", "channel_type": "memory", "channel_ids": [cn]},
                {"name": "wait", "channel_type": "memory", "channel_ids": [cp]},
                {"name": "re", "reduce_op": "sum", "src_buff": [loc("o", cr), loc("s", k)], "dst_buff": [loc("o", cr)]}])
        for k in range(n - 1):
            cs, cr = (r + 1 - k) % n, (r - k) % n
            t.op("pws", channel_type="memory", channel_ids=[cn], src_buff=[loc("o", cs)],
                 dst_buff=[t.rb("memory", nxt, "s", n - 1 + k)])
            t.op("wait", channel_type="memory", channel_ids=[cp])
            t.op("copy", src_buff=[loc("s", n - 1 + k)], dst_buff=[loc("o", cr)])
        gs.append(g)
    return plan("allreduce_ring_pipeline_n%d" % n, "allreduce", gs)


def allreduce_rre(n):
    """Zero copy: rres reads every peer's input chunk, reduces, writes the result to every output."""
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, 0)
        t = g.tb()
        allc = [t.ch("memory", p) for p in peers(n, r)]
        entry_round(t, "memory", peers(n, r))
        t.op("rres", channel_type="memory", channel_ids=allc, reduce_op="sum",
             src_buff=[loc("i", r)] + [t.rb("memory", p, "i", r) for p in peers(n, r)],
             dst_buff=[loc("o", r)] + [t.rb("memory", p, "o", r) for p in peers(n, r)])
        t.op("signal", channel_type="memory", channel_ids=allc)
        t.op("wait", channel_type="memory", channel_ids=allc)
        gs.append(g)
    return plan("allreduce_rres_n%d" % n, "allreduce", gs)


def allreduce_rre_inplace(n):
    """In place: rre into a scratch copy (peers still read our input), then write back and share."""
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, 1)
        t = g.tb()
        allc = [t.ch("memory", p) for p in peers(n, r)]
        entry_round(t, "memory", peers(n, r))
        t.op("rre", channel_type="memory", channel_ids=allc, reduce_op="sum",
             src_buff=[loc("i", r)] + [t.rb("memory", p, "i", r) for p in peers(n, r)], dst_buff=[loc("s", 0)])
        t.op("signal", channel_type="memory", channel_ids=allc)
        t.op("wait", channel_type="memory", channel_ids=allc)
        for p in peers(n, r):
            t.op("put", channel_type="memory", channel_ids=[t.ch("memory", p)], src_buff=[loc("s", 0)],
                 dst_buff=[t.rb("memory", p, "i", r)])
        t.op("copy", src_buff=[loc("s", 0)], dst_buff=[loc("i", r)])
        t.op("signal", channel_type="memory", channel_ids=allc)
        t.op("wait", channel_type="memory", channel_ids=allc)
        gs.append(g)
    return plan("allreduce_rre_inplace_n%d" % n, "allreduce", gs, inplace=True)


def allreduce_ll_perf(n, nb):
    """The built-in one-shot LL allreduce as a plan: nb blocks, block b sends input chunk b as packets
    to every peer's scratch (one ppkt with a channel per peer) and reduces it with the packets that
    arrive (repkt)."""
    gs = []
    for r in range(n):
        g = Gpu(r, nb, nb, n * nb)
        for b in range(nb):
            t = g.tb()
            ps = peers(n, r)  # one op puts to every peer: one decode and barrier instead of n - 1
            t.op("ppkt", channel_type="memory", channel_ids=[t.ch("memory", p) for p in ps], src_buff=[loc("i", b)],
                 dst_buff=[t.rb("memory", p, "s", r * nb + b) for p in ps])
            t.op("repkt", reduce_op="sum", src_buff=[loc("i", b)] + [loc("s", p * nb + b) for p in peers(n, r)],
                 dst_buff=[loc("o", b)])
        gs.append(g)
    # Double scratch: called back to back, a rank one call ahead would otherwise overwrite packets
    # a slower peer has not read yet (seen on 4 GPUs).
    return plan("allreduce_ll_perf%d_n%d" % (nb, n), "allreduce", gs, protocol="LL", use_double_scratch_buffer=True)


def allreduce_rres_perf(n, nb):
    """Zero-copy allreduce for large messages with nb blocks, each on its own channel to every peer:
    a round (the peers' inputs are ready and their outputs free), rres of chunk r * nb + b (read the
    peers' chunk, reduce, write it to every output), a closing round."""
    gs = []
    for r in range(n):
        g = Gpu(r, n * nb, n * nb, 0)
        for b in range(nb):
            t = g.tb()
            allc = [t.ch("memory", p, b) for p in peers(n, r)]
            c = r * nb + b
            t.op("signal", channel_type="memory", channel_ids=allc)
            t.op("wait", channel_type="memory", channel_ids=allc)
            t.op("rres", channel_type="memory", channel_ids=allc, reduce_op="sum",
                 src_buff=[loc("i", c)] + [t.rb("memory", p, "i", c) for p in peers(n, r)],
                 dst_buff=[loc("o", c)] + [t.rb("memory", p, "o", c) for p in peers(n, r)])
            t.op("signal", channel_type="memory", channel_ids=allc)
            t.op("wait", channel_type="memory", channel_ids=allc)
        gs.append(g)
    return plan("allreduce_rres_perf%d_n%d" % (nb, n), "allreduce", gs)


def allreduce_copy_local(nb):
    """One rank, nb blocks, block b copies input chunk b to the output: the executor's fixed cost
    per launch and op (an allreduce of one rank is a copy)."""
    g = Gpu(0, nb, nb, 0)
    for b in range(nb):
        g.tb().op("copy", src_buff=[loc("i", b)], dst_buff=[loc("o", b)])
    return plan("allreduce_copy_local%d_n1" % nb, "allreduce", [g])


def allreduce_ll_local(nb):
    """One rank, nb blocks, the packet ops of one-shot LL without a peer: block b writes input chunk
    b as packets into scratch chunk b (cpkt), then unpacks them into the output (upkt; the flags are
    there at once). An allreduce of one rank is a copy."""
    g = Gpu(0, nb, nb, nb)
    for b in range(nb):
        t = g.tb()
        t.op("cpkt", src_buff=[loc("i", b)], dst_buff=[loc("s", b)])
        t.op("upkt", src_buff=[loc("s", b)], dst_buff=[loc("o", b)])
    return plan("allreduce_ll_local%d_n1" % nb, "allreduce", [g], protocol="LL", use_double_scratch_buffer=True)


def perf_plans():
    """(kind, plan) of the performance plans: the built-ins' shapes for 2-8 ranks and 1-rank ones."""
    out = []
    for n in (2, 3, 4, 8):
        out.append(("ll1", allreduce_ll_perf(n, 1)))  # the built-in's shape up to 4 KiB per part
        out.append(("ll", allreduce_ll_perf(n, 64)))
        out.append(("rres", allreduce_rres_perf(n, 64)))
    out.append(("ll", allreduce_ll_local(64)))
    out.append(("ll1", allreduce_ll_local(1)))
    out.append(("copy", allreduce_copy_local(64)))
    out.append(("copy1", allreduce_copy_local(1)))
    return out


def allreduce_switch(n, split):
    """Switch channels (emulated): glres, or glre + gstore, on the rank's own chunk."""
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, 0)
        si, so = g.switch("i", range(n)), g.switch("o", range(n))
        t = g.tb()
        a, b = t.sw(si), t.sw(so)
        entry_round(t, "memory", peers(n, r))
        if split:
            t.op("glre", channel_type="switch", channel_ids=[a], reduce_op="sum",
                 src_buff=[{"switch_channel_id": a, "index": r, "size": 1}], dst_buff=[loc("o", r)])
            t.op("gstore", channel_type="switch", channel_ids=[b], src_buff=[loc("o", r)],
                 dst_buff=[{"switch_channel_id": b, "index": r, "size": 1}])
        else:
            t.op("glres", channel_type="switch", channel_ids=[a, b], reduce_op="sum",
                 src_buff=[{"switch_channel_id": a, "index": r, "size": 1}],
                 dst_buff=[{"switch_channel_id": b, "index": r, "size": 1}])
        allc = [t.ch("memory", p) for p in peers(n, r)]
        t.op("signal", channel_type="memory", channel_ids=allc)
        t.op("wait", channel_type="memory", channel_ids=allc)
        gs.append(g)
    return plan("allreduce_switch_%s_n%d" % ("glre_gstore" if split else "glres", n), "allreduce", gs)


def allreduce_align1(n):
    """All-pairs with buffer_alignment 1 (as the XML converter writes for algorithms with MSCCL
    scratch): chunks split to the byte, equal whenever the size divides by n."""
    p = allreduce_allpairs(n)
    p["name"] = "allreduce_allpairs_align1_n%d" % n
    p["buffer_alignment"] = 1
    return p


def allreduce_max_port(n):
    """Port channels and reduce_op max (pwsf: put, signal, flush)."""
    p = allreduce_allpairs(n, "port")
    p["name"] = "allreduce_max_port_n%d" % n
    for g in p["gpus"]:
        for t in g["threadblocks"]:
            for o in t["ops"]:
                if o["name"] == "re":
                    o["reduce_op"] = "max"
                if o["name"] == "pws":
                    o["name"] = "pwsf"
    return p


# ---- data movement ---------------------------------------------------------------------------

def allgather(n, inplace, ct="memory"):
    gs = []
    for r in range(n):
        g = Gpu(r, 1, n, 0)
        t = g.tb()
        src = loc("o", r) if inplace else loc("i", 0)
        entry_round(t, ct, peers(n, r))
        if not inplace:
            t.op("copy", src_buff=[src], dst_buff=[loc("o", r)])
        for p in peers(n, r):
            t.op("pws" if ct == "memory" else "pwsf", channel_type=ct, channel_ids=[t.ch(ct, p)], src_buff=[src],
                 dst_buff=[t.rb(ct, p, "o", r)])
        t.op("wait", channel_type=ct, channel_ids=[t.ch(ct, p) for p in peers(n, r)])
        gs.append(g)
    return plan("allgather_%s_%s_n%d" % ("inplace" if inplace else "outofplace", ct, n), "allgather", gs, inplace=inplace)


def allgather_sync(n):
    """Two blocks: tb0 copies and releases a semaphore; tb1 acquires it; both meet at a barrier;
    tb0 and tb1 each put half of the chunk (tbg_info) and signal; tb0 waits for both halves."""
    gs = []
    for r in range(n):
        g = Gpu(r, 1, n, 0)
        s = g.sem(0)
        t0, t1 = g.tb(), g.tb()
        entry_round(t0, "memory", peers(n, r))  # t1 passes barrier 0 after it
        t0.op("copy", src_buff=[loc("i", 0)], dst_buff=[loc("o", r)], tbg_info={"tb_id": 0, "tbg_size": 2})
        t1.op("copy", src_buff=[loc("i", 0)], dst_buff=[loc("o", r)], tbg_info={"tb_id": 1, "tbg_size": 2})
        t0.op("sem_release", semaphore_ids=[s])
        t1.op("sem_acquire", semaphore_ids=[s])
        for i, t in enumerate((t0, t1)):
            t.op("barrier", barrier_id=0, num_threadblocks=2)
            t.op("nop")
            for p in peers(n, r):
                t.op("pws", channel_type="memory", channel_ids=[t.ch("memory", p)], src_buff=[loc("i", 0)],
                     dst_buff=[t.rb("memory", p, "o", r)], tbg_info={"tb_id": i, "tbg_size": 2})
        allc = [t0.ch("memory", p) for p in peers(n, r)]
        t0.op("wait", channel_type="memory", channel_ids=allc)
        t0.op("rlxwait", channel_type="memory", channel_ids=allc)
        t0.op("barrier", barrier_id=1, num_threadblocks=2)
        t1.op("barrier", barrier_id=1, num_threadblocks=2)
        gs.append(g)
    return plan("allgather_barrier_sem_tbg_n%d" % n, "allgather", gs)


def allgather_get(n):
    gs = []
    for r in range(n):
        g = Gpu(r, 1, n, 0)
        t = g.tb()
        entry_round(t, "memory", peers(n, r))
        t.op("copy", src_buff=[loc("i", 0)], dst_buff=[loc("o", r)])
        for p in peers(n, r):
            t.op("get", channel_type="memory", channel_ids=[t.ch("memory", p)], src_buff=[t.rb("memory", p, "i", 0)],
                 dst_buff=[loc("o", p)])
        allc = [t.ch("memory", p) for p in peers(n, r)]
        t.op("rlxsignal", channel_type="memory", channel_ids=allc)
        t.op("flush", channel_type="memory", channel_ids=allc)
        t.op("rlxwait", channel_type="memory", channel_ids=allc)
        gs.append(g)
    return plan("allgather_get_n%d" % n, "allgather", gs)


def allgather_ll_ring(n):
    """LL ring: ppkt to the next rank, rppkt forwards what arrives, cpkt/upkt unpack locally. Double
    scratch: a rank hears from its next rank only through the whole ring, after which that rank is
    in the same call; one scratch would let a rank one call ahead overwrite unread packets."""
    gs = []
    for r in range(n):
        nxt = (r + 1) % n
        g = Gpu(r, 1, n, n)
        t = g.tb()
        t.op("cpkt", src_buff=[loc("i", 0)], dst_buff=[loc("s", r)])
        t.op("ppkt", channel_type="memory", channel_ids=[t.ch("memory", nxt)], src_buff=[loc("i", 0)],
             dst_buff=[t.rb("memory", nxt, "s", r)])
        for k in range(1, n - 1):
            c = (r - k) % n
            t.op("rppkt", channel_type="memory", channel_ids=[t.ch("memory", nxt)], src_buff=[loc("s", c)],
                 dst_buff=[t.rb("memory", nxt, "s", c)])
        for p in range(n):
            t.op("upkt", src_buff=[loc("s", p)], dst_buff=[loc("o", p)])
        # the previous rank sends to us over its channel to us: pair it
        t.ch("memory", (r - 1) % n)
        gs.append(g)
    return plan("allgather_ll_ring_n%d" % n, "allgather", gs, protocol="LL", use_double_scratch_buffer=True)


def allgather_switch_ll(n):
    gs = []
    for r in range(n):
        g = Gpu(r, 1, n, n + 1)
        ss = g.switch("s", range(n))
        t = g.tb()
        a = t.sw(ss)
        # gstorepkt stores packets already made (the reference's meaning): the input is packed into
        # the scratch chunk past the group's first, then stored from there to every member.
        t.op("cpkt", src_buff=[loc("i", 0)], dst_buff=[loc("s", n)])
        t.op("gstorepkt", channel_type="switch", src_buff=[loc("s", n)],
             dst_buff=[{"switch_channel_id": a, "index": r, "size": 1}])
        for p in range(n):
            t.op("upkt", src_buff=[loc("s", p)], dst_buff=[loc("o", p)])
        gs.append(g)
    return plan("allgather_switch_ll_n%d" % n, "allgather", gs, protocol="LL", use_double_scratch_buffer=True)


def reducescatter(n):
    gs = []
    for r in range(n):
        g = Gpu(r, n, 1, n)
        t = g.tb()
        for p in peers(n, r):
            t.op("pws", channel_type="memory", channel_ids=[t.ch("memory", p)], src_buff=[loc("i", p)],
                 dst_buff=[t.rb("memory", p, "s", r)])
        t.op("wait", channel_type="memory", channel_ids=[t.ch("memory", p) for p in peers(n, r)])
        t.op("re", reduce_op="sum", src_buff=[loc("i", r)] + [loc("s", p) for p in peers(n, r)], dst_buff=[loc("o", 0)])
        gs.append(g)
    # Double scratch: a rank one call ahead writes the other half (it heard from every peer in the
    # call between, so they finished reading this half).
    return plan("reducescatter_n%d" % n, "reducescatter", gs, use_double_scratch_buffer=True)


def alltoall(n):
    gs = []
    for r in range(n):
        g = Gpu(r, n, n, 0)
        t = g.tb()
        entry_round(t, "memory", peers(n, r))
        t.op("copy", src_buff=[loc("i", r)], dst_buff=[loc("o", r)])
        for p in peers(n, r):
            t.op("pws", channel_type="memory", channel_ids=[t.ch("memory", p)], src_buff=[loc("i", p)],
                 dst_buff=[t.rb("memory", p, "o", r)])
        t.op("wait", channel_type="memory", channel_ids=[t.ch("memory", p) for p in peers(n, r)])
        gs.append(g)
    return plan("alltoall_n%d" % n, "alltoall", gs)


def sendrecv(n):
    gs = []
    for r in range(n):
        nxt, prv = (r + 1) % n, (r - 1) % n
        g = Gpu(r, 1, 1, 0)
        for p in sorted({nxt, prv}):
            g.chan("memory", p)
        t = g.tb()
        t.op("signal", channel_type="memory", channel_ids=[t.ch("memory", prv)])  # our output is free
        t.op("wait", channel_type="memory", channel_ids=[t.ch("memory", nxt)])  # so is the next rank's
        t.op("pws", channel_type="memory", channel_ids=[t.ch("memory", nxt)], src_buff=[loc("i", 0)],
             dst_buff=[t.rb("memory", nxt, "o", 0)])
        t.op("wait", channel_type="memory", channel_ids=[t.ch("memory", prv)])
        gs.append(g)
    return plan("sendrecv_n%d" % n, "sendrecv", gs)


def deadlock(n):
    """Valid (signals and waits balance) but every rank waits before it signals: the run must end
    with a bounded-wait error naming rank, block, op and peer, not hang."""
    gs = []
    for r in range(n):
        g = Gpu(r, 1, 1, 0)
        t = g.tb()
        c = t.ch("memory", (r + 1) % n)
        t.op("wait", channel_type="memory", channel_ids=[c])
        t.op("signal", channel_type="memory", channel_ids=[c])
        gs.append(g)
    return plan("deadlock_n%d" % n, "custom", gs)


GOOD = [  # (plan, ranks, sizes)
    (allreduce_allpairs(2), 2, "4096,1000,65536"),
    (allreduce_allpairs(4), 4, "4096,1000,24"),
    (allreduce_allpairs(8), 8, "8192,1000"),
    (allreduce_allpairs_ll(2), 2, "4096,1000"),
    (allreduce_allpairs_ll(4), 4, "4096,1000"),
    (allreduce_allpairs_ll(8), 8, "8192,1000"),
    (allreduce_ll_recs(4), 4, "4096,1000"),
    (allreduce_ll_recpkt(2), 2, "4096,1000"),
    (allreduce_ll_recpkt(4), 4, "4096,1000,24"),
    (allreduce_res(3, "memory"), 3, "4096,1000,12"),
    (allreduce_res(2, "port"), 2, "4096,1000"),
    (allreduce_ring(4), 4, "4096,1000,100000"),
    (allreduce_ring(2), 2, "4096,1000"),
    (allreduce_rre(4), 4, "4096,1000"),
    (allreduce_rre_inplace(4), 4, "4096,1000"),
    (allreduce_switch(4, False), 4, "4096,1000"),
    (allreduce_switch(4, True), 4, "4096,1000"),
    (allreduce_max_port(4), 4, "4096,1000"),
    (allreduce_align1(4), 4, "4096,1008,48"),  # 252- and 12-byte chunks: not 16-byte units
    (allreduce_ll_perf(2, 4), 2, "4096,1000"),
    (allreduce_ll_perf(4, 4), 4, "4096,1000"),
    (allreduce_rres_perf(2, 4), 2, "4096,1000"),
    (allreduce_rres_perf(4, 2), 4, "4096,1000"),
    (allgather(4, False), 4, "4096,1000,12"),
    (allgather(4, True), 4, "4096,1000"),
    (allgather(3, False, "port"), 3, "4096,1000"),
    (allgather_sync(4), 4, "4096,1000"),
    (allgather_get(4), 4, "4096,1000"),
    (allgather_ll_ring(4), 4, "4096,1000"),
    (allgather_switch_ll(4), 4, "4096,1000"),
    (reducescatter(4), 4, "4096,1000"),
    (alltoall(4), 4, "4096,1008"),
    (sendrecv(2), 2, "4096,1000"),
    (sendrecv(4), 4, "4096,1000"),
]

REDUCE_OPS = ("sum", "prod", "max", "min")
REDUCE_CODES = {"re", "res", "rre", "rres", "repkt", "respkt", "recpkt", "recspkt", "glre", "glres"}


def with_reduce_op(p, red):
    """A copy of plan p whose every reduce op (nested ones too) uses reduce_op red."""
    q = copy.deepcopy(p)
    q["name"] = "%s_%s" % (p["name"], red)

    def fix(ops):
        for o in ops:
            if o["name"] in REDUCE_CODES:
                o["reduce_op"] = red
            fix(o.get("ops", []))
    for g in q["gpus"]:
        for t in g["threadblocks"]:
            fix(t["ops"])
    return q


# Every reduce_op on every datatype (tests/plans/plans.cmake runs each op's plans with --dtype all):
# one plan per reduction path of the CPU executor (data, packets, switch), 3 ranks, sizes that are
# whole 8-byte elements (984 bytes: 123 of them, an odd count that the 3 ranks split unevenly).
REDOP_PLANS = [allreduce_allpairs(3), allreduce_ll_recpkt(3), allreduce_switch(3, False)]
REDOP_RANKS, REDOP_SIZES = 3, "984,24"


# ---- bad plans: (name, mutate(plan), substring of the error) ----------------------------------

def bad_plans():
    base = allreduce_allpairs(2)
    out = []

    def mut(name, fn, expect, src=None):
        p = copy.deepcopy(src or base)
        fn(p)
        out.append((name, p, expect))

    g0 = lambda p: p["gpus"][0]
    op0 = lambda p, i=0: p["gpus"][0]["threadblocks"][0]["ops"][i]
    mut("bad_opname", lambda p: op0(p).update(name="frobnicate"), "'frobnicate' is not one of")
    mut("bad_chunk_range", lambda p: op0(p)["src_buff"][0].update(index=7), "chunks [7, 8)")
    mut("bad_imbalance", lambda p: g0(p)["threadblocks"][0]["ops"].insert(1, dict(op0(p, 1))), "imbalance")
    mut("bad_channel_id", lambda p: op0(p).update(channel_ids=[5]), "field 'channel_ids'")
    mut("bad_buffer_id", lambda p: op0(p)["dst_buff"][0].update(buffer_id=9), "field 'dst_buff': buffer_id 9")
    mut("bad_reduce_op", lambda p: op0(p, 3).update(reduce_op="median"), "field 'reduce_op'")
    mut("bad_buffer_type", lambda p: op0(p)["src_buff"][0].update(type="x"), "field 'src_buff': 'x'")
    mut("bad_gpu_id", lambda p: g0(p).update(id=5), "gpu 0: field 'id'")
    mut("bad_missing_gpus", lambda p: p.pop("gpus"), "field 'gpus': missing")
    mut("bad_protocol", lambda p: p.update(protocol="Fast"), "field 'protocol'")
    mut("bad_packet_in_simple", lambda p: op0(p).update(name="ppkt"), "packet op ppkt")
    mut("bad_tbg", lambda p: op0(p).update(tbg_info={"tb_id": 2, "tbg_size": 2}), "field 'tb_id'")
    mut("bad_pipeline", lambda p: g0(p)["threadblocks"][0]["ops"].insert(0, {"name": "pipeline", "ops": []}),
        "field 'iter_context'")
    mut("bad_unpaired_channel", lambda p: g0(p)["channels"].append({"channel_type": "port", "connected_to": [1]}),
        "port channels connected to gpu 1")
    mut("bad_barrier", lambda p: g0(p)["threadblocks"][0]["ops"].insert(0, {"name": "barrier", "barrier_id": 0,
                                                                            "num_threadblocks": 2}),
        "field 'num_threadblocks'")
    mut("bad_semaphore", lambda p: (g0(p).update(semaphores=[{"init_value": 0}]),
                                   g0(p)["threadblocks"][0]["ops"].insert(0, {"name": "sem_acquire", "semaphore_ids": [0]})),
        "semaphore 0 is acquired")
    mut("bad_semaphore_id", lambda p: g0(p)["threadblocks"][0]["ops"].insert(0, {"name": "sem_release",
                                                                                 "semaphore_ids": [3]}),
        "field 'semaphore_ids'")
    mut("bad_self_channel", lambda p: g0(p)["channels"][0].update(connected_to=[0]), "field 'connected_to'")
    mut("bad_put_local_dst", lambda p: op0(p).update(dst_buff=[loc("o", 0)]), "field 'dst_buff': entry 0 of put")
    mut("bad_remote_rank", lambda p: g0(p)["remote_buffers"][0].update(rank=9), "field 'rank'")
    mut("bad_alignment", lambda p: p.update(buffer_alignment=12), "field 'buffer_alignment'")
    mut("bad_sizes", lambda p: op0(p)["src_buff"][0].update(size=2), "the op's first reference 2")
    ring = allreduce_ring(2)
    mut("bad_pipeline_chunks", lambda p: p["gpus"][0]["threadblocks"][0]["ops"][1]["iter_context"].update(num_chunks=0),
        "field 'num_chunks'", ring)
    mut("bad_pipeline_nested", lambda p: p["gpus"][0]["threadblocks"][0]["ops"][1]["ops"][0]["src_buff"][0].update(size=2)
        or p["gpus"][0]["threadblocks"][0]["ops"][1]["ops"][0]["dst_buff"][0].update(size=2), "more than num_chunks 1", ring)
    return out


def main():
    if sys.argv[1] == "--perf":
        for kind, p in perf_plans():
            os.makedirs(os.path.join(sys.argv[2], kind), exist_ok=True)
            with open(os.path.join(sys.argv[2], kind, p["name"] + ".json"), "w") as pf:
                json.dump(p, pf, indent=1)
        return
    outdir = sys.argv[1]
    os.makedirs(os.path.join(outdir, "bad"), exist_ok=True)
    import dsl_plans  # here, not at the top: it builds on this module's helpers
    with open(os.path.join(outdir, "good.tsv"), "w") as f:
        for p, n, sizes, fname in [g + (None,) for g in GOOD] + dsl_plans.goods():
            path = os.path.join(outdir, (fname or p["name"]) + ".json")
            with open(path, "w") as pf:
                json.dump(p, pf, indent=1)
            f.write("%s\t%d\t%s\n" % (path, n, sizes))
    os.makedirs(os.path.join(outdir, "redop"), exist_ok=True)
    with open(os.path.join(outdir, "redop.tsv"), "w") as f:  # op, ranks, sizes, plan files (comma-separated)
        for red in REDUCE_OPS:
            paths = []
            for base in REDOP_PLANS:
                q = with_reduce_op(base, red)
                paths.append(os.path.join(outdir, "redop", q["name"] + ".json"))
                with open(paths[-1], "w") as pf:
                    json.dump(q, pf, indent=1)
            f.write("%s\t%d\t%s\t%s\n" % (red, REDOP_RANKS, REDOP_SIZES, ",".join(paths)))
    with open(os.path.join(outdir, "deadlock_n2.json.hang"), "w") as pf:
        json.dump(deadlock(2), pf, indent=1)
    with open(os.path.join(outdir, "bad", "expect.tsv"), "w") as f:
        for name, p, expect in bad_plans() + dsl_plans.bads():
            path = os.path.join(outdir, "bad", name + ".json")
            with open(path, "w") as pf:
                json.dump(p, pf, indent=1)
            f.write("%s\t%s\n" % (path, expect))
        path = os.path.join(outdir, "bad", "bad_syntax.json")
        with open(path, "w") as pf:
            pf.write('{"name": "x",\n "gpus": [ }\n')
        f.write("%s\t%s\n" % (path, "line 2 column"))


if __name__ == "__main__":
    main()
