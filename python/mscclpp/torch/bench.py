"""Collective benchmark through torch.distributed: all_reduce, all_gather_into_tensor and
reduce_scatter_tensor over a range of sizes and dtypes, for several backends in the same processes
(one process group each, dist.new_group(backend=...)), eager and inside CUDA graphs, next to torch
SymmetricMemory's one-shot / two-shot allreduce and NCCL on window-registered buffers.

    torchrun --nproc_per_node 4 -m mscclpp.torch.bench --csv out.csv --plot out.png
    torchrun --nproc_per_node 4 python/mscclpp/torch/bench.py --backends mscclpp,nccl --factor 4
    torchrun --nproc_per_node 2 python/mscclpp/torch/bench.py --device cpu --backends gloo --max-bytes 1M

Methods: each backend of --backends by its name; on CUDA also "nccl-win" (a NCCL group whose
buffers come from its ncclMemAlloc pool, window-registered: register_mem_pool(pool, symm=True)),
"symm-1shot" and "symm-2shot" (torch.ops.symm_mem.one_shot_all_reduce / two_shot_all_reduce_ on
a SymmetricMemory buffer; allreduce only). One that cannot start is left out with a note.

Sizes (nccl-tests' convention): all_reduce the tensor's bytes, all_gather_into_tensor the output's,
reduce_scatter_tensor the input's (the other side is size / world). Every method's result is checked
exactly (small integers) against the expected values, eager (there also against the first method's
result) and after the first replay of its graph. Times: microseconds per call, the slowest rank's; eager:
--warmup calls then --iters timed with CUDA events; graph: --graph-calls calls captured in one CUDA
graph, replayed --replays times. Large sizes use fewer calls (at least 3). ratio = the best other
method's time / ours (--ours): above 1, ours is faster. Rank 0 prints one table, writes --csv and
--plot; exits 1 when a result is wrong or a call of a --backends method fails (a method whose
CUDA graph capture fails gets no graph times and a note; the nccl-win / symm methods' failed calls
are noted only)."""
import argparse
import csv
import os
import sys
import time

# Before CUDA / NCCL start: NVLink multicast stays off (NVLS and SymmetricMemory's multimem).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
LARGE = 64 << 20  # above this many bytes the call counts shrink in proportion


def parse_bytes(text: str) -> int:
    """'8', '64K', '1M', '1G' (powers of 1024) -> bytes."""
    text = text.strip().upper().rstrip("IB").rstrip("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", default="mscclpp,nccl", help="comma-separated torch.distributed backends")
    p.add_argument("--ours", default="mscclpp", help="the method the ratio is for (default mscclpp, else the first)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--dtype", default="bfloat16,float32", help="comma-separated: bfloat16, float32, float16")
    p.add_argument("--collectives", default=",".join(COLLECTIVES),
                   help="comma-separated subset of " + ", ".join(COLLECTIVES))
    p.add_argument("--min-bytes", type=parse_bytes, default=8)
    p.add_argument("--max-bytes", type=parse_bytes, default=1 << 30)
    p.add_argument("--factor", type=int, choices=(2, 4), default=2)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--graph-calls", type=int, default=20, help="calls captured per CUDA graph")
    p.add_argument("--replays", type=int, default=5, help="timed replays of each graph")
    p.add_argument("--no-graph", action="store_true")
    p.add_argument("--no-symm-mem", action="store_true")
    p.add_argument("--no-nccl-window", action="store_true")
    p.add_argument("--csv", help="write one row per (mode, collective, dtype, size, method)")
    p.add_argument("--plot", help="write a PNG: time vs size, log-log, a line per method")
    a = p.parse_args(argv)
    a.backends = [b for b in a.backends.split(",") if b]
    a.dtypes = [getattr(torch, d) for d in a.dtype.split(",") if d]
    a.collectives = [c for c in a.collectives.split(",") if c]
    if not a.backends or any(c not in COLLECTIVES for c in a.collectives) or not 1 <= a.min_bytes <= a.max_bytes:
        p.error("need at least one backend, known collectives and 1 <= --min-bytes <= --max-bytes")
    if a.device == "cpu":
        a.no_graph = a.no_symm_mem = a.no_nccl_window = True
    return a


def human(nbytes: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return "%d%s" % (nbytes >> shift, unit)
    return "%d" % nbytes


# --- methods -------------------------------------------------------------------------------------

class Method:
    """One way to run the collectives. call(coll, inp, out) runs one call and returns the result
    tensor (all_reduce in place on inp unless out_of_place_ar). inp_buf / out_buf: byte buffers of
    --max-bytes each that every call's tensors are views of (offset 0)."""

    colls = COLLECTIVES
    out_of_place_ar = False
    extra = False  # True for the comparison methods beyond --backends

    def __init__(self, name, group, device, nbytes):
        self.name, self.group, self.device = name, group, device
        self.inp_buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
        self.out_buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
        self.graph_ok = True  # cleared on the first failed capture

    def close(self):
        pass

    def call(self, coll, inp, out):
        if coll == "all_reduce":
            dist.all_reduce(inp, group=self.group)
            return inp
        if coll == "all_gather":
            dist.all_gather_into_tensor(out, inp, group=self.group)
        else:
            dist.reduce_scatter_tensor(out, inp, group=self.group)
        return out


class NcclWindow(Method):
    """A NCCL group whose buffers come from its ncclMemAlloc pool, window-registered with the
    communicator (NCCL's symmetric kernels); raises where this torch / NCCL cannot."""

    def __init__(self, name, device, nbytes):
        group = dist.new_group(backend="nccl")
        warm = torch.ones(1, device=device)
        dist.all_reduce(warm, group=group)  # the communicator must exist before registering
        backend = group._get_backend(device)
        self.pool = torch.cuda.MemPool(backend.mem_allocator)
        with torch.cuda.use_mem_pool(self.pool):
            super().__init__(name, group, device, nbytes)
        backend.register_mem_pool(self.pool, symm=True)
        torch.cuda.synchronize()
        self.extra = True

    def close(self):
        torch.cuda.synchronize()
        self.group._get_backend(self.device).deregister_mem_pool(self.pool)


class SymmMem(Method):
    """torch SymmetricMemory allreduce (sum) on a symmetric buffer: one_shot_all_reduce (out of
    place) or two_shot_all_reduce_ (in place)."""

    colls = ("all_reduce",)

    def __init__(self, name, group, device, nbytes, one_shot):
        import torch.distributed._symmetric_memory as symm_mem
        self.name, self.group, self.device, self.graph_ok, self.extra = name, group, device, True, True
        self.one_shot = self.out_of_place_ar = one_shot
        self.inp_buf = symm_mem.empty(nbytes, dtype=torch.uint8, device=device)
        symm_mem.rendezvous(self.inp_buf, group)
        # Never the input's buffer: the checks clear the output before a call (the symm_mem ops do
        # not use it; one-shot returns a new tensor, two-shot works in place).
        self.out_buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
        self.group_name = group.group_name

    def call(self, coll, inp, out):
        if self.one_shot:
            return torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", self.group_name)
        return torch.ops.symm_mem.two_shot_all_reduce_(inp, "sum", self.group_name)


def describe(e: Exception) -> str:
    return "%s: %s" % (type(e).__name__, (str(e).splitlines() or [""])[0][:200])


def agree(ctrl, ok: bool) -> bool:
    """True where every rank says ok (over the gloo control group)."""
    flag = torch.tensor([0 if ok else 1])
    dist.all_reduce(flag, group=ctrl)
    return int(flag.item()) == 0


def make_methods(args, device, ctrl, notes):
    """The methods in column order: --backends, then nccl-win, symm-1shot, symm-2shot."""
    methods, nccl_group = [], None
    for name in args.backends:
        if name == "mscclpp":
            try:
                import mscclpp.torch  # noqa: F401  (registers the "mscclpp" backend)
            except ImportError as e:
                sys.exit("bench.py: backend mscclpp needs the mscclpp package with its torch backend "
                         "(import mscclpp.torch failed: %s)" % e)
        group = dist.new_group(backend=name)
        label = name if name not in [m.name for m in methods] else "%s#%d" % (name, len(methods) + 1)
        methods.append(Method(label, group, device, args.max_bytes))
        nccl_group = group if name == "nccl" else nccl_group
    extras = []
    if not args.no_nccl_window:
        extras.append(("nccl-win", lambda: NcclWindow("nccl-win", device, args.max_bytes)))
    if not args.no_symm_mem:
        # Symmetric memory rendezvous through a NCCL group (the one torch tests it with).
        def symm(one_shot):
            group = nccl_group or dist.new_group(backend="nccl")
            return SymmMem("symm-1shot" if one_shot else "symm-2shot", group, device, args.max_bytes, one_shot)
        extras += [("symm-1shot", lambda: symm(True)), ("symm-2shot", lambda: symm(False))]
    for name, make in extras:
        try:
            method, err = make(), None
        except Exception as e:  # noqa: BLE001  (any failure: left out with a note)
            method, err = None, describe(e)
        if agree(ctrl, err is None):
            methods.append(method)
        else:
            notes.append("%s left out (%s)" % (name, err or "failed on another rank"))
    return methods


# --- data and checks -----------------------------------------------------------------------------

def pattern(n, dtype, device):
    """n small integers in [-4, 4], the same on every rank."""
    return (torch.arange(n, device=device, dtype=torch.int32) % 9 - 4).to(dtype)


def sizes_of(coll, nbytes, esize, world):
    """(input elements, output elements) of one call of `nbytes` (see the module doc); 0 when the
    size is too small for this collective and world."""
    n = nbytes // esize
    if coll == "all_reduce":
        return n, n
    n -= n % world
    return (n // world, n) if coll == "all_gather" else (n, n // world)


def expected(coll, p, rank, world):
    """The result on this rank when rank r's input is p + r (p: the pattern of the input's size)."""
    offsets = world * (world - 1) // 2
    if coll == "all_reduce":
        return p * world + offsets
    if coll == "all_gather":
        return torch.cat([p + r for r in range(world)])
    m = p.numel() // world
    return p[rank * m:(rank + 1) * m] * world + offsets


# --- timing --------------------------------------------------------------------------------------

class Clock:
    """Seconds between start() and stop() on this rank's device; the slowest rank's via ctrl."""

    def __init__(self, device, ctrl):
        self.device, self.ctrl = device, ctrl
        if device.type == "cuda":
            self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def start(self):
        self.sync()
        dist.barrier(group=self.ctrl)
        if self.device.type == "cuda":
            self.events[0].record()
        self.t0 = time.perf_counter()

    def stop(self) -> float:
        if self.device.type == "cuda":
            self.events[1].record()
            self.events[1].synchronize()
            secs = self.events[0].elapsed_time(self.events[1]) / 1000.0
        else:
            secs = time.perf_counter() - self.t0
        t = torch.tensor([secs], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.ctrl)
        return float(t.item())


def mismatch(got, want) -> str:
    """Where got first differs from want, in words."""
    if got.shape != want.shape:
        return "shape %s, expected %s" % (tuple(got.shape), tuple(want.shape))
    got, want = got.reshape(-1), want.reshape(-1)
    bad = (got != want).nonzero().reshape(-1)
    if bad.numel() == 0:
        return "equal"
    i = int(bad[0])
    return "%d of %d elements wrong, the first at %d: %s, expected %s" % (
        bad.numel(), got.numel(), i, got[i].item(), want[i].item())


def calls_for(count, nbytes, least=3):
    """count, scaled down above LARGE bytes."""
    return count if nbytes <= LARGE else max(least, count * LARGE // nbytes)


def bench_one(m, coll, dtype, nbytes, n_in, n_out, want, first, clock, args, rank, world):
    """Checks and times one method at one size. Returns {mode: (us or None, check)} and the eager
    result (the reference for later methods)."""
    inp = m.inp_buf.view(dtype)[:n_in]
    out = m.out_buf.view(dtype)[:n_out]
    p_in = pattern(n_in, dtype, m.device) + rank
    rows = {}

    def check(got, want_now, ref):
        ok = got.shape == want_now.shape and torch.equal(got, want_now)
        if not ok:
            print("bench: rank %d: %s %s %s %s: %s" % (rank, m.name, coll, dtype, human(nbytes),
                                                      mismatch(got, want_now)), flush=True)
        elif ref is not None and not torch.equal(got, ref):
            ok = False
            print("bench: rank %d: %s %s %s %s: differs from the first method's result: %s" % (
                rank, m.name, coll, dtype, human(nbytes), mismatch(got, ref)), flush=True)
        return agree(clock.ctrl, ok)

    # Eager: check, then time (an in-place allreduce on zeros, so values do not grow).
    inp.copy_(p_in)
    out.zero_()
    err = None
    try:
        res = m.call(coll, inp, out)
        clock.sync()
    except Exception as e:  # noqa: BLE001  (e.g. a size or dtype the method does not take)
        err = describe(e)
    if not agree(clock.ctrl, err is None):
        if rank == 0:
            print("bench: %s %s %s %s: failed (%s)" % (m.name, coll, dtype, human(nbytes), err or "on another rank"),
                  flush=True)
        return {mode: (None, "error") for mode in ("eager",) + (() if args.no_graph else ("graph",))}, None
    eager_ok = check(res, want, first)
    result = res.clone() if first is None else None
    if coll == "all_reduce" and not m.out_of_place_ar:
        inp.zero_()
    for _ in range(args.warmup):
        m.call(coll, inp, out)
    iters = calls_for(args.iters, nbytes)
    clock.start()
    for _ in range(iters):
        m.call(coll, inp, out)
    rows["eager"] = (clock.stop() / iters * 1e6, "ok" if eager_ok else "WRONG")

    if args.no_graph:
        return rows, result
    if not m.graph_ok:
        rows["graph"] = (None, "capture failed")
        return rows, result
    # Graph: capture K calls, replay once and check (K in-place allreduces scale the sum by
    # world^(K-1): exact for a power-of-two world, else not checked), then time.
    k = calls_for(args.graph_calls, nbytes, least=2)
    inp.copy_(p_in)
    out.zero_()
    clock.sync()
    graph, err = torch.cuda.CUDAGraph(), None
    try:
        # thread_local: CUDA calls of a backend's own threads (progress, watchdog) stay legal.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            for _ in range(k):
                res = m.call(coll, inp, out)
    except Exception as e:  # noqa: BLE001
        err = describe(e)
    if not agree(clock.ctrl, err is None):
        m.graph_ok = False
        rows["graph"] = (None, "capture failed")
        if rank == 0:
            print("bench: %s: CUDA graph capture failed (%s); no graph times for it" % (m.name, err or "another rank"),
                  flush=True)
        return rows, result
    graph.replay()
    clock.sync()
    scaled = coll == "all_reduce" and not m.out_of_place_ar and k > 1
    if scaled and world & (world - 1):
        graph_check = "ok (unchecked)"
    else:
        graph_check = "ok" if check(res, want * world ** (k - 1) if scaled else want, None) else "WRONG"
    if coll == "all_reduce" and not m.out_of_place_ar:
        inp.zero_()
    replays = calls_for(args.replays, nbytes, least=2)
    graph.replay()
    clock.start()
    for _ in range(replays):
        graph.replay()
    rows["graph"] = (clock.stop() / (replays * k) * 1e6, graph_check)
    del graph
    return rows, result


# --- report --------------------------------------------------------------------------------------

def print_table(records, methods, ours, world, notes):
    """records: {(mode, coll, dtype name, nbytes): {method: (us, check)}}."""
    others = [m for m in methods if m != ours]
    w = max(10, *(len(m) + 1 for m in methods))
    head = "%-5s %-14s %-8s %6s " % ("mode", "collective", "dtype", "size") + "".join("%*s" % (w, m) for m in methods)
    print("\nus per call (slowest of %d ranks); ratio = best other / %s (above 1: %s faster)" % (world, ours, ours))
    print(head + "%12s %7s  %s" % ("best other", "ratio", "check"))
    for (mode, coll, dt, nbytes), row in records.items():
        cells = "".join("%*s" % (w, "%.1f" % row[m][0] if m in row and row[m][0] is not None else "-") for m in methods)
        # a method whose result was wrong is no comparison: left out of "best other"
        timed = {m: row[m][0] for m in others if m in row and row[m][0] is not None and row[m][1].startswith("ok")}
        best = min(timed, key=timed.get) if timed else None
        mine = row.get(ours, (None, ""))[0]
        ratio = "%.2f" % (timed[best] / mine) if best and mine else "-"
        bad = [m + " " + row[m][1] for m in methods if m in row and not row[m][1].startswith("ok")]
        print("%-5s %-14s %-8s %6s " % (mode, coll, dt, human(nbytes)) + cells
              + "%12s %7s  %s" % (best or "-", ratio, "; ".join(bad) or "ok"))
    for note in notes:
        print("note: " + note)
    print(flush=True)


def write_csv(path, records, world, sizes_used):
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["mode", "collective", "dtype", "size", "bytes", "ranks", "method", "us", "algbw_GBps", "check"])
        for (mode, coll, dt, nbytes), row in records.items():
            actual = sizes_used[(coll, dt, nbytes)]
            for m, (us, chk) in row.items():
                bw = "%.3f" % (actual / us / 1e3) if us else ""
                out.writerow([mode, coll, dt, nbytes, actual, world, m, "%.3f" % us if us is not None else "", bw, chk])


def plot(path, records, methods, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = sorted({(coll, dt) for (_, coll, dt, _) in records}, key=lambda k: (COLLECTIVES.index(k[0]), k[1]))
    modes = [m for m in ("eager", "graph") if any(k[0] == m for k in records)]
    fig, axes = plt.subplots(len(panels), len(modes), figsize=(6 * len(modes), 3.4 * len(panels)), squeeze=False)
    for i, (coll, dt) in enumerate(panels):
        for j, mode in enumerate(modes):
            ax = axes[i][j]
            for m in methods:
                pts = [(k[3], row[m][0]) for k, row in records.items()
                       if k[:3] == (mode, coll, dt) and m in row and row[m][0] is not None]
                if pts:
                    ax.plot(*zip(*pts), marker="o", markersize=3, label=m)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title("%s %s, %s" % (coll, dt, mode))
            ax.set_xlabel("bytes")
            ax.set_ylabel("us per call")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- main ----------------------------------------------------------------------------------------

def main(argv=None):
    args = parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if args.device == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    # The default group (gloo, CPU) is the control group: barriers, agreement, slowest-rank times.
    dist.init_process_group("gloo")
    ctrl = dist.group.WORLD
    notes = []
    if args.no_graph and args.device == "cuda":
        notes.append("CUDA graphs off (--no-graph)")
    methods = make_methods(args, device, ctrl, notes)
    names = [m.name for m in methods]
    ours = args.ours if args.ours in names else names[0]
    clock = Clock(device, ctrl)
    sizes, s = [], args.min_bytes
    while s <= args.max_bytes:
        sizes.append(s)
        s *= args.factor

    records, sizes_used, wrong = {}, {}, 0
    for dtype in args.dtypes:
        dt = str(dtype).replace("torch.", "")
        esize = torch.empty((), dtype=dtype).element_size()
        for coll in args.collectives:
            for nbytes in sizes:
                n_in, n_out = sizes_of(coll, nbytes, esize, world)
                if n_out == 0 or n_in == 0:
                    continue
                sizes_used[(coll, dt, nbytes)] = max(n_in, n_out) * esize
                want = expected(coll, pattern(n_in, dtype, device), rank, world)
                first = None
                for m in methods:
                    if coll not in m.colls:
                        continue
                    rows, result = bench_one(m, coll, dtype, nbytes, n_in, n_out, want, first, clock, args, rank, world)
                    first = result if first is None else first
                    for mode, cell in rows.items():
                        records.setdefault((mode, coll, dt, nbytes), {})[m.name] = cell
                        # the comparison methods' wrong results are reported in the table and left
                        # out of the ratio; only the --backends methods fail the run
                        wrong += (cell[1] in ("WRONG", "error")) and not m.extra
                del want, first
                if rank == 0 and nbytes == sizes[-1]:
                    print("bench: %s %s done" % (coll, dt), flush=True)
    records = dict(sorted(records.items(), key=lambda kv: (kv[0][0], COLLECTIVES.index(kv[0][1]), kv[0][2], kv[0][3])))
    if rank == 0:
        print_table(records, names, ours, world, notes)
        if args.csv:
            write_csv(args.csv, records, world, sizes_used)
            print("bench: wrote %s" % args.csv)
        if args.plot:
            plot(args.plot, records, names, "%d ranks, %s" % (world, args.device))
            print("bench: wrote %s" % args.plot)
        print("bench: %s" % ("OK" if wrong == 0 else "FAILED: %d results wrong or calls failed" % wrong), flush=True)
    dist.barrier(group=ctrl)
    for m in methods:
        try:
            m.close()
        except Exception as e:  # noqa: BLE001  (teardown only)
            print("bench: rank %d: closing %s: %s" % (rank, m.name, describe(e)), flush=True)
    dist.destroy_process_group()
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
