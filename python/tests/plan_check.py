"""Run an execution plan (JSON text) on N CPU ranks through the bindings and check every result
against NumPy.

Ranks are processes (multiprocessing, spawn) meeting at 127.0.0.1 on a free port (ranks.free_port);
each loads the plan with ExecutionPlan(json=...), runs it through Executor.execute on NumPy buffers
of small-integer values (exact in every dtype used), in place or out of place as the plan's
`inplace` says, and compares with the collective computed by NumPy (the plan's `collective`).

    from plan_check import check_plan, sizes_for
    check_plan(text, 4, [(count, "float32"), (count, "int32")])

`count` is always the number of elements of one rank's input buffer."""
import json
import multiprocessing as mp
import queue

import numpy as np
from ranks import free_port

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall")


def value(rank, i):
    """Input element i of rank: small integers, so sums of 8 ranks are exact in float16 too."""
    return (rank + 1) * 3 + i % 7


def rank_input(rank, count, dtype):
    return np.array([value(rank, i) for i in range(count)], dtype=dtype)


def expected(coll, n, rank, count, dtype):
    """What rank's output buffer must hold after the collective over count-element inputs."""
    allv = [rank_input(r, count, dtype) for r in range(n)]
    if coll == "allreduce":
        return sum(allv).astype(dtype)
    if coll == "allgather":
        return np.concatenate(allv)
    if coll == "reducescatter":
        c = count // n
        return sum(allv).astype(dtype)[rank * c:(rank + 1) * c]
    if coll == "alltoall":
        c = count // n
        return np.concatenate([v[rank * c:(rank + 1) * c] for v in allv])
    raise ValueError("no NumPy model of collective %r" % coll)


def layout(coll, n, rank, count, dtype, inplace):
    """(input, output) arrays of rank for a count-element input. In place they share memory the
    NCCL way: allreduce and alltoall the same buffer, allgather's input is the rank's slice of the
    output, reducescatter's output the rank's slice of the input."""
    x = rank_input(rank, count, dtype)
    if coll in ("allreduce", "alltoall"):
        return x, (x if inplace else np.zeros_like(x))
    if coll == "allgather":
        out = np.zeros(count * n, dtype=dtype)
        if not inplace:
            return x, out
        out[rank * count:(rank + 1) * count] = x
        return out[rank * count:(rank + 1) * count], out
    if coll == "reducescatter":
        c = count // n
        return x, (x[rank * c:(rank + 1) * c] if inplace else np.zeros(c, dtype=dtype))
    raise ValueError("no layout for collective %r" % coll)


def granularity(doc):
    """Smallest input byte count for which every chunk of every buffer of the plan is a whole
    number of buffer_alignment units (each rank's input chunks, and the output's for allgather)."""
    align = doc.get("buffer_alignment", 16)
    gpu = doc["gpus"][0]
    chunks = gpu["input_chunks"]
    if doc["collective"] == "allgather":  # output chunks cover n inputs
        chunks = max(chunks, -(-gpu["output_chunks"] // len(doc["gpus"])))
    if doc["collective"] in ("reducescatter", "alltoall"):
        chunks = max(chunks, len(doc["gpus"]))  # the per-rank slice must be whole too
    return chunks * align


def sizes_for(doc, dtype, multiples=(1, 3)):
    """Input element counts (per rank) that are the given multiples of the plan's granularity."""
    g = granularity(doc)
    item = np.dtype(dtype).itemsize
    return [m * g // item for m in multiples]


def rank_main(rank, n, port, text, cases, calls, q):
    """One rank: every (count, dtype) case run `calls` times; puts (rank, error text or None)."""
    try:
        from mscclpp import CommGroup, ExecutionPlan, Executor
        from mscclpp.utils import numpy_dtype_to_mscclpp_dtype
        with CommGroup(interfaceIpPortTrio="127.0.0.1:%d" % port, rank=rank, size=n) as comm:
            plan = ExecutionPlan(json=text, name="plan_check")
            ex = Executor(comm)
            for count, dtype_name in cases:
                dtype = np.dtype(dtype_name)
                want = expected(plan.collective, n, rank, count, dtype)
                for call in range(calls):
                    x, out = layout(plan.collective, n, rank, count, dtype, plan.inplace)
                    ex.execute(plan, x, out, x.nbytes, out.nbytes, dtype=numpy_dtype_to_mscclpp_dtype(dtype))
                    bad = np.flatnonzero(out != want)
                    if bad.size:
                        i = int(bad[0])
                        q.put((rank, "%s x %d, call %d: %d of %d elements wrong, first [%d] = %s, want %s" % (
                            dtype_name, count, call, bad.size, want.size, i, out[i], want[i])))
                        return
        q.put((rank, None))
    except Exception as e:  # noqa: BLE001 - the parent reports it
        q.put((rank, "%s: %s" % (type(e).__name__, e)))


def run_bounded(target, n, args, timeout):
    """target(rank, n, port, *args, queue) in n spawned processes; {rank: error or None}. Ranks
    that have not answered within timeout seconds are killed and reported as hung."""
    ctx = mp.get_context("spawn")
    q, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=target, args=(r, n, port) + tuple(args) + (q,), daemon=True) for r in range(n)]
    for p in procs:
        p.start()
    results = {}
    try:
        while len(results) < n:
            r, err = q.get(timeout=timeout)
            results[r] = err
    except queue.Empty:
        for r in range(n):
            results.setdefault(r, "no answer in %d s (hung)" % timeout)
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    return results


def check_plan(text, n, cases, calls=2, timeout=60):
    """Run plan JSON text on n CPU ranks for each (count, dtype name) case, `calls` launches each
    (fresh buffers every launch); AssertionError naming every failing rank."""
    doc = json.loads(text)
    assert len(doc["gpus"]) == n, "the plan is for %d ranks, not %d" % (len(doc["gpus"]), n)
    assert doc["collective"] in COLLECTIVES, "no NumPy model for collective %r" % doc["collective"]
    results = run_bounded(rank_main, n, (text, list(cases), calls), timeout)
    bad = {r: e for r, e in sorted(results.items()) if e}
    assert not bad, "%s on %d ranks: %s" % (doc.get("name"), n, bad)
