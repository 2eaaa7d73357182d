#!/usr/bin/env python3
"""The GPU check of the DSL examples (not run by pytest: it needs GPUs and PyTorch).

Every example of examples/dsl that can run here (the switch-channel one needs NVLink multicast,
which is off limits) is compiled by this package's DSL for N ranks, then run on N GPU ranks of this
host, one process each (multiprocessing, spawn), meeting at 127.0.0.1:
  1. through Executor.execute on RawGpuBuffer memory (in place or out of place as the plan says),
     float32 and float16 at two sizes, twice each, every element compared with NumPy's result;
  2. registered (ExecutionPlanRegistry.register_plan) and called through the library's collective
     (the Algorithm of build_default_algorithms), checked the same way, and the registry's count of
     calls the plan served must grow;
  3. timed (eager, CUDA events, rank 0's time) through that collective at TIME_BYTES with the plan
     registered and with the built-in algorithm (registry cleared), same run.
Prints a table last and "gpu_dsl_check: OK"; exits 1 on any failure.

    python3 python/tests/gpu_dsl_check.py [-n N] [--only NAME]

Needs the mscclpp package built with CUDA on PYTHONPATH (or installed), PyTorch with CUDA, NumPy."""
import argparse
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "dsl"))
import catalog  # noqa: E402
from plan_check import expected, granularity, rank_input, run_bounded  # noqa: E402

TIME_BYTES = (1 << 20, 16 << 20)
ITERS = 20


def pointers(coll, n, rank, count, es, inplace, base):
    """(input, output, input bytes, output bytes) of rank in one device allocation at base, laid out
    as plan_check.layout does (in place the NCCL way)."""
    ib = count * es
    if coll in ("allreduce", "alltoall"):
        return base, (base if inplace else base + ib), ib, ib
    if coll == "allgather":
        out = base + ib
        return (out + rank * ib if inplace else base), out, ib, n * ib
    c = ib // n  # reducescatter
    return base, (base + rank * c if inplace else base + ib), ib, c


class GpuRank:
    """One rank's communicator, executor, device buffer and stream."""

    def __init__(self, rank, n, port):
        import torch
        import mscclpp
        self.torch, self.m, self.rank, self.n = torch, mscclpp, rank, n
        torch.cuda.set_device(rank)
        self.comm = mscclpp.CommGroup(interfaceIpPortTrio="127.0.0.1:%d" % port, rank=rank, size=n)
        self.ex = mscclpp.Executor(self.comm)
        self.buf = mscclpp.RawGpuBuffer(64 << 20)
        self.bytes = torch.from_dlpack(self.buf).view(torch.uint8)
        self.base = self.buf.data_ptr()
        self.stream = torch.cuda.Stream()

    def fill(self, ptr, values):
        off = ptr - self.base
        src = self.torch.from_numpy(values.view("uint8").copy()).cuda()
        self.bytes[off:off + src.numel()].copy_(src)

    def read(self, ptr, nbytes, dtype):
        import numpy as np
        off = ptr - self.base
        return self.bytes[off:off + nbytes].cpu().numpy().view(np.dtype(dtype))

    def case(self, doc, count, dtype, run):
        """Lays out one call, runs run(input, output, in bytes, out bytes, DataType), checks it."""
        import numpy as np
        from mscclpp.utils import numpy_dtype_to_mscclpp_dtype
        coll, inplace, es = doc["collective"], bool(doc["inplace"]), np.dtype(dtype).itemsize
        pi, po, ib, ob = pointers(coll, self.n, self.rank, count, es, inplace, self.base)
        assert (po - self.base) + ob <= self.bytes.numel() and (pi - self.base) + ib <= self.bytes.numel()
        self.bytes.fill_(0xA5)
        self.fill(pi, rank_input(self.rank, count, dtype))
        self.torch.cuda.synchronize()
        with self.torch.cuda.stream(self.stream):
            run(pi, po, ib, ob, numpy_dtype_to_mscclpp_dtype(np.dtype(dtype)))
        self.stream.synchronize()
        got, want = self.read(po, ob, dtype), expected(coll, self.n, self.rank, count, np.dtype(dtype))
        bad = np.flatnonzero(got != want)
        if bad.size:
            i = int(bad[0])
            raise AssertionError("%s x %d: %d of %d wrong, [%d] = %s, want %s" % (dtype, count, bad.size, want.size, i,
                                                                               got[i], want[i]))

    def timed(self, run, pi, po, ib, ob, dt):
        """Mean microseconds per call of ITERS eager calls on this rank's stream."""
        t = self.torch
        with t.cuda.stream(self.stream):
            for _ in range(3):
                run(pi, po, ib, ob, dt)
            start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(ITERS):
                run(pi, po, ib, ob, dt)
            end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / ITERS


def check_example(g, name, text):
    """Steps 1-3 for one plan on this rank; returns {bytes: (plan us, built-in us)}."""
    m, doc, s = g.m, json.loads(text), g.stream.cuda_stream
    plan = m.ExecutionPlan(json=text, name=name)
    counts = [k * granularity(doc) // 4 for k in (1, 37)]
    for dtype in ("float32", "float16"):
        for count in counts if dtype == "float32" else [c * 2 for c in counts]:
            for _ in range(2):
                g.case(doc, count, dtype, lambda pi, po, ib, ob, dt: g.ex.execute(plan, pi, po, ib, ob, dt, s))
    algo = {a.collective: a for a in m.AlgorithmCollectionBuilder().build_default_algorithms(rank=g.rank)}[doc["collective"]]
    op = m.ReduceOp.SUM if doc["collective"] in ("allreduce", "reducescatter") else m.ReduceOp.NOP

    def coll(pi, po, ib, ob, dt):
        algo.execute(g.comm.communicator, pi, po, ib, ob, dt, op=op, stream=s)

    m.ExecutionPlanRegistry.register_plan(m.ExecutionPlan(json=text, name=name))
    served = lambda: sum(p[3] for p in m.ExecutionPlanRegistry.plans())  # noqa: E731
    before = served()
    g.case(doc, counts[1], "float32", coll)
    if served() <= before:
        raise AssertionError("the registered plan did not serve the collective's call")
    times = {}
    for nbytes in TIME_BYTES:
        unit = granularity(doc) // 4  # float32 elements of one granule
        per_rank = nbytes // (g.n if doc["collective"] == "allgather" else 1)  # allgather: nbytes of output
        count = max(1, per_rank // 4 // unit) * unit
        pi, po, ib, ob = pointers(doc["collective"], g.n, g.rank, count, 4, bool(doc["inplace"]), g.base)
        dt = m.DataType.float32
        t_plan = g.timed(coll, pi, po, ib, ob, dt)
        m.ExecutionPlanRegistry.clear()
        t_builtin = g.timed(coll, pi, po, ib, ob, dt)
        m.ExecutionPlanRegistry.register_plan(m.ExecutionPlan(json=text, name=name))
        times[ib] = (t_plan, t_builtin)
    m.ExecutionPlanRegistry.clear()
    return times


def rank_main(rank, n, port, plans, q):
    try:
        g = GpuRank(rank, n, port)
        rows = []
        for name, text in plans:
            try:
                rows.append((name, check_example(g, name, text), None))
            except Exception as e:  # noqa: BLE001 - reported per example
                rows.append((name, {}, "%s: %s" % (type(e).__name__, e)))
            g.comm.barrier()
        q.put((rank, rows))
    except Exception:  # noqa: BLE001
        q.put((rank, traceback.format_exc()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=0, help="ranks (default: every GPU)")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    import torch
    n = args.n or torch.cuda.device_count()
    plans = [(name, catalog.compile_example(name, n)) for name, e in catalog.EXAMPLES.items()
             if e["skip_run"] is None and args.only in name]
    results = run_bounded(rank_main, n, (plans,), timeout=600)
    failed = 0
    for r, rows in sorted(results.items()):
        if isinstance(rows, str):
            print("rank %d failed:\n%s" % (r, rows))
            failed += 1
            continue
        for name, _, err in rows:
            if err:
                print("rank %d %s: %s" % (r, name, err))
                failed += 1
    print("\n%-22s %5s %10s %10s %10s %7s" % ("example", "ranks", "bytes", "plan us", "builtin us", "ratio"))
    rows0 = results.get(0) if not isinstance(results.get(0), str) else []
    for name, times, err in rows0 or []:
        for nbytes, (tp, tb) in sorted(times.items()):
            print("%-22s %5d %10d %10.2f %10.2f %6.2fx" % (name, n, nbytes, tp, tb, tb / tp))
        if err:
            print("%-22s %5d  FAILED: %s" % (name, n, err[:80]))
    print("gpu_dsl_check: %s (%d plans, %d ranks)" % ("OK" if not failed else "FAILED", len(plans), n))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
