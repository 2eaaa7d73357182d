#!/usr/bin/env python3
"""The order check through `mscclpp-plan validate [--strict]`: plans whose synchronization keeps
back-to-back calls apart pass with no finding (every plan of the corpus in CORPUS_DIR, the
performance plans and the MSCCL XML samples converted, among them);
plans with a known hazard each produce the finding that names it (scratch reuse one call apart, a
write into a peer's buffer before the peer started the call, a cycle of waits, packets nobody
writes); a plan the check does not model is skipped with the reason; --strict fails exactly the
plans with findings.

    check_order.py MSCCLPP_PLAN OUT_DIR CORPUS_DIR
"""
import glob
import copy
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_plans as gp  # noqa: E402


def validate(tool, path, strict=True, **env):
    args = [tool, "validate"] + (["--strict"] if strict else []) + [path]
    env.setdefault("MSCCLPP_LOG_LEVEL", "none")
    env.setdefault("MSCCLPP_PLAN_ORDER_CHECK", "warn")  # the plans as written (fix may change them)
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
                       env=dict(os.environ, **env))
    return r.returncode, r.stdout


def write(out, name, plan):
    path = os.path.join(out, name + ".json")
    with open(path, "w") as f:
        json.dump(plan, f)
    return path


def without_entry_round(p):
    """Plan p with the signal and wait that open each block's ops (gen_plans.entry_round) taken out."""
    p = copy.deepcopy(p)
    for g in p["gpus"]:
        for t in g["threadblocks"]:
            if [o["name"] for o in t["ops"][:2]] == ["signal", "wait"]:
                del t["ops"][:2]
    return p


def oneshot_rre(n, inplace, via_scratch):
    """One-shot allreduce by remote reads: a round, rre of the whole buffer from every peer's input
    (into scratch, or straight into the output), a round, then the copy out of scratch. In place,
    straight into the output overwrites the input that peers may still be reading."""
    gs = []
    for r in range(n):
        g = gp.Gpu(r, 1, 1, 1 if via_scratch else 0)
        t = g.tb()
        ps = gp.peers(n, r)
        allc = [t.ch("memory", p) for p in ps]
        gp.entry_round(t, "memory", ps)
        t.op("rre", channel_type="memory", channel_ids=allc, reduce_op="sum",
             src_buff=[gp.loc("i", 0)] + [t.rb("memory", p, "i", 0) for p in ps],
             dst_buff=[gp.loc("s", 0) if via_scratch else gp.loc("o", 0)])
        t.op("signal", channel_type="memory", channel_ids=allc)
        t.op("wait", channel_type="memory", channel_ids=allc)
        if via_scratch:
            t.op("copy", src_buff=[gp.loc("s", 0)], dst_buff=[gp.loc("o", 0)])
        gs.append(g)
    return gp.plan("oneshot_rre", "allreduce", gs, inplace=inplace)


def renamed_ops(p, old, new):
    """Plan p with every op named old named new."""
    p = copy.deepcopy(p)
    for g in p["gpus"]:
        for t in g["threadblocks"]:
            for o in t["ops"]:
                if o["name"] == old:
                    o["name"] = new
    return p


def single_scratch(p):
    p = copy.deepcopy(p)
    p["use_double_scratch_buffer"] = False
    return p


def two_waiters():
    """Two threadblocks of gpu 0 wait on the same channel: outside what the check models."""
    gs = []
    for r in range(2):
        g = gp.Gpu(r, 1, 1, 0)
        g.chan("memory", 1 - r)
        for _ in range(2):
            t = g.tb()
            t.op("signal" if r else "wait", channel_type="memory", channel_ids=[t.ch("memory", 1 - r)])
        gs.append(g)
    return gp.plan("two_waiters", "custom", gs)


def no_writer(n):
    """The LL all-pairs allreduce with gpu 1's packets to its peers removed: they wait for ever."""
    p = gp.allreduce_allpairs_ll(n)
    ops = p["gpus"][1]["threadblocks"][0]["ops"]
    ops[:] = [o for o in ops if o["name"] != "ppkt"]
    return p


def converted_xml(tool, out):
    """The MSCCL XML samples of tests/xml converted to plans (mscclpp-plan convert)."""
    xml_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "xml")
    paths = []
    for x in sorted(glob.glob(os.path.join(xml_dir, "*.xml"))):
        if os.path.basename(x).startswith("bad_"):
            continue
        paths.append(os.path.join(out, "xml_" + os.path.basename(x)[:-4] + ".json"))
        subprocess.run([tool, "convert", x, "-o", paths[-1]], check=True, stdout=subprocess.DEVNULL, timeout=60)
    return paths


def expect(tool, path, rc, has=(), lacks=()):
    got_rc, text = validate(tool, path)
    ok = got_rc == rc and all(h in text for h in has) and not any(x in text for x in lacks)
    print("%s: %s" % ("ok" if ok else "FAILED", os.path.basename(path)))
    if not ok:
        print("  expected exit %d with %s and without %s; got exit %d:\n%s" % (rc, list(has), list(lacks), got_rc, text))
    return ok


def main():
    tool, out = sys.argv[1], sys.argv[2]
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    os.makedirs(out, exist_ok=True)
    # One-shot LL with one scratch: the all-pairs plan stays in step by itself (a rank's next call
    # starts after it unpacked what each peer sent once done reading its packets); the perf plan's
    # blocks only send, and a rank one call ahead overwrites packets (its 64-block form hung so on
    # 4 GPUs; 4 blocks show the same).
    single, perf_single = single_scratch(gp.allreduce_allpairs_ll(4)), single_scratch(gp.allreduce_ll_perf(4, 4))
    cases = [  # (name, plan, exit status, substrings, substrings that must not appear)
        ("allpairs_simple", gp.allreduce_allpairs(4), 0, [": OK"], ["order:"]),
        ("allpairs_ll_double", gp.allreduce_allpairs_ll(4), 0, [": OK"], ["order:"]),
        ("ll_perf", gp.allreduce_ll_perf(4, 4), 0, [": OK"], ["order:"]),
        ("ring_pipeline", gp.allreduce_ring(4), 0, [": OK"], ["order:"]),
        ("sendrecv_entry", gp.sendrecv(3), 0, [": OK"], ["order:"]),
        ("allpairs_ll_single", single, 0, [": OK"], ["order:"]),
        ("ll_perf_single", perf_single, 1,
         ["gpu 0 threadblock 0 op 1 (repkt) reads gpu 0's scratch chunks [4, 5) and gpu 1 threadblock 0 op 0 (ppkt) "
          "writes gpu 0's scratch chunks [4, 5) one call apart", "use_double_scratch_buffer", "FAILED (order)"], []),
        ("reducescatter", single_scratch(gp.reducescatter(4)), 1,
         ["(re) reads gpu 0's scratch chunks", "one call apart"], []),
        ("allgather_ll_ring", single_scratch(gp.allgather_ll_ring(4)), 1, ["(upkt) reads", "one call apart"], []),
        ("sendrecv", without_entry_round(gp.sendrecv(3)), 1,
         ["gpu 0 threadblock 0 op 0 (pws) writes gpu 1's output chunks [0, 1) before that rank has started the call"], []),
        ("allgather_get", without_entry_round(gp.allgather_get(4)), 1,
         ["(get) reads gpu 0's input chunks", "before that rank has started"], []),
        ("alltoall", without_entry_round(gp.alltoall(4)), 1, ["(pws) writes gpu 0's output chunks"], []),
        # two blocks signal one channel per peer (tbg halves): the round's wait must still be
        # placed after the peer's round signal, which its other signals all follow
        ("allgather_sync", without_entry_round(gp.allgather_sync(4)), 1,
         ["gpu 1 threadblock 1 op 4 (pws) writes gpu 0's output chunks [1, 2) before"], []),
        ("deadlock", gp.deadlock(2), 1, ["op 0 (wait) can never proceed"], []),
        # port channels: pwsf is done when the op is; pws leaves the transfer to the proxy, still
        # reading the input when the call may have returned (the peers' waits do not cover it)
        ("allgather_port_pws", renamed_ops(gp.allgather(3, False, "port"), "pwsf", "pws"), 1,
         ["gpu 0 threadblock 0 op 3 (pws, by the proxy) reads gpu 0's input chunks [0, 1) possibly after that rank's "
          "call has returned"], []),
        ("oneshot_rre_outofplace", oneshot_rre(3, False, False), 0, [": OK"], ["order:"]),
        ("oneshot_rre_inplace_scratch", oneshot_rre(3, True, True), 0, [": OK"], ["order:"]),
        ("oneshot_rre_inplace", oneshot_rre(3, True, False), 1,
         ["gpu 0 threadblock 0 op 2 (rre) writes gpu 0's output chunks [0, 1) and gpu 1 threadblock 0 op 2 (rre) "
          "reads gpu 0's input chunks [0, 1) in the same call", "gpu 2's output"], []),
        ("no_writer", no_writer(4), 1, ["waits for packets in scratch that no op writes"], []),
        ("two_waiters", two_waiters(), 0, ["order check skipped", "waited on by more than one threadblock"], []),
    ]
    ok = all([expect(tool, write(out, n, copy.deepcopy(p)), rc, has, lacks) for n, p, rc, has, lacks in cases])
    corpus = sorted(glob.glob(os.path.join(sys.argv[3], "*.json")) + glob.glob(os.path.join(sys.argv[3], "redop", "*.json")))
    corpus += [write(out, "perf_%s_%s" % (kind, p["name"]), p) for kind, p in gp.perf_plans()]
    corpus += converted_xml(tool, out)
    ok = all([expect(tool, path, 0, [": OK"], [": order:", "skipped"]) for path in corpus]) and len(corpus) >= 50 and ok
    # without --strict a plan with findings still validates (exit 0) and its findings are listed
    rc, text = validate(tool, os.path.join(out, "sendrecv.json"), strict=False)
    lenient = rc == 0 and "OK (with order findings)" in text and "order: gpu" in text
    print("%s: sendrecv without --strict" % ("ok" if lenient else "FAILED"))
    if not lenient:
        print(text)
    # MSCCLPP_PLAN_ORDER_CHECK at load: warn logs, strict refuses, off stays quiet, fix turns double
    # scratch on where that removes findings (the 4-block LL plan) and leaves other plans alone
    bad, good = os.path.join(out, "sendrecv.json"), os.path.join(out, "sendrecv_entry.json")
    perf = os.path.join(out, "ll_perf_single.json")
    load = [(bad, "warn", 0, ["WARN", "the order check found 3 problems"]),
            (bad, "strict", 1, ["MSCCLPP_PLAN_ORDER_CHECK=strict refuses it", "writes gpu 0's output chunks"]),
            (good, "strict", 0, [": OK"]),
            (bad, "off", 0, ["OK (with order findings)", "order: gpu"]),
            (perf, "fix", 0, ["use_double_scratch_buffer turned on at load", "with one scratch the order check finds",
                              "with two 0", "ll_perf_single.json: OK"]),
            (bad, "fix", 0, ["the order check found 3 problems", "OK (with order findings)"]),
            (good, "sometimes", 1, ["MSCCLPP_PLAN_ORDER_CHECK=sometimes: not one of off, warn, fix, strict"])]
    for path, mode, want_rc, has in load:
        rc, text = validate(tool, path, strict=False, MSCCLPP_PLAN_ORDER_CHECK=mode, MSCCLPP_LOG_LEVEL="warn")
        good_load = rc == want_rc and all(h in text for h in has) and (mode != "off" or "WARN" not in text)
        good_load = good_load and (mode == "fix" and path == perf) == ("turned on" in text)
        print("%s: load with MSCCLPP_PLAN_ORDER_CHECK=%s, %s" % ("ok" if good_load else "FAILED", mode, path))
        if not good_load:
            print(text)
        lenient = lenient and good_load
    return 0 if ok and lenient and json_report(tool, bad, good) else 1


def json_report(tool, bad, good):
    """validate --strict --json: one document, a record per plan, exit 1 when one is not ok."""
    missing = bad + ".missing"
    r = subprocess.run([tool, "validate", "--strict", "--json", bad, good, missing], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True, timeout=60,
                       env=dict(os.environ, MSCCLPP_PLAN_ORDER_CHECK="warn"))
    try:
        doc = json.loads(r.stdout)
        b, g, m = doc["plans"]
        good_doc = (r.returncode == 1 and doc["ok"] is False and
                    b["ok"] is False and b["order"]["checked"] and b["order"]["count"] == 3 and
                    len(b["order"]["findings"]) == 3 and "before that rank has started" in b["order"]["findings"][0] and
                    g["ok"] is True and g["order"]["count"] == 0 and g["error"] is None and
                    m["ok"] is False and "No such file" in m["error"] and not m["order"]["checked"])
    except (ValueError, KeyError, TypeError) as e:
        good_doc = False
        print("not the json expected: %s" % e)
    print("%s: validate --strict --json" % ("ok" if good_doc else "FAILED"))
    if not good_doc:
        print(r.stdout)
    return good_doc


if __name__ == "__main__":
    sys.exit(main())
