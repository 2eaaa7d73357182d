#!/usr/bin/env python3
"""The GPU check of native algorithms (not run by pytest: it needs GPUs and PyTorch).

examples/torch-integration/customized_allgather.cu is built by mscclpp.compile_native (in the parent
first, so the ranks find it cached) and run on N GPU ranks of this host, one process each
(multiprocessing, spawn), meeting at 127.0.0.1: several sizes and datatypes, repeated calls on
reused and fresh buffers with new values each time (a context per output size), in place, on a
stream of the rank's own, captured into a CUDA graph and replayed, and a short timing at the largest
size. Every result is compared with the expected one on the GPU. Prints one line per rank and
"gpu_native_check: OK" at the end; exits 1 on any failure.

    python3 python/tests/native/gpu_native_check.py            # one rank per GPU (at least 2)
    python3 python/tests/native/gpu_native_check.py -n 2       # 2 ranks
    MSCCLPP_NATIVE_CUDA_ARCH=sm_90 python3 ...                 # nvcc's target (default: this GPU)

Needs the mscclpp package built with CUDA (pip install .), PyTorch with CUDA, nvcc."""
import argparse
import multiprocessing as mp
import os
import socket
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "..", "examples", "torch-integration", "customized_allgather.cu")
SIZES = (1, 1000, 4096, 1 << 16, (1 << 20) + 3, 16 << 20)  # elements per rank
DTYPES = ("float32", "float16", "int8")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pattern(torch, rank, count, dtype, salt):
    """Rank's input: distinct per rank, element and call (exact in every dtype used)."""
    v = (torch.arange(count, device="cuda", dtype=torch.int64) * 7 + rank * 13 + salt * 5) % 101
    return v.to(getattr(torch, dtype))


def expected(torch, n, count, dtype, salt):
    return torch.cat([pattern(torch, k, count, dtype, salt) for k in range(n)])


class Rank:
    """One rank's communicator, algorithm and stream, and its checks."""

    def __init__(self, torch, mscclpp, rank, n, port):
        self.torch, self.mscclpp, self.rank, self.n = torch, mscclpp, rank, n
        self.comm = mscclpp.CommGroup(interfaceIpPortTrio="127.0.0.1:%d" % port, rank=rank, size=n)
        mod = mscclpp.compile_native(name="customized_allgather", file=EXAMPLE)
        self.algo = mscclpp.Algorithm.create_from_native_capsule(mod.create_allgather_algorithm())
        self.stream = torch.cuda.Stream()
        self.calls = 0

    def run(self, x, y, dtype):
        from mscclpp.utils import torch_dtype_to_mscclpp_dtype
        with self.torch.cuda.stream(self.stream):
            self.algo.execute(self.comm.communicator, x.data_ptr(), y.data_ptr(), x.nbytes, y.nbytes,
                              torch_dtype_to_mscclpp_dtype(x.dtype), stream=self.stream.cuda_stream)
        self.calls += 1

    def check(self, y, want, what):
        self.stream.synchronize()
        if not self.torch.equal(y, want):
            bad = int((y != want).sum())
            first = int((y != want).nonzero()[0, 0])
            raise AssertionError("rank %d, %s: %d of %d elements wrong (first at %d: %s, want %s)"
                                 % (self.rank, what, bad, y.numel(), first, y[first].item(), want[first].item()))

    def sizes_and_dtypes(self):
        torch = self.torch
        for dtype in DTYPES:
            for count in SIZES:
                y = torch.zeros(count * self.n, device="cuda", dtype=getattr(torch, dtype))
                for salt in range(3):  # the same buffers again (new values), then fresh ones
                    x = pattern(torch, self.rank, count, dtype, salt)
                    if salt == 2:
                        y = torch.zeros_like(y)
                    self.stream.wait_stream(torch.cuda.current_stream())
                    self.run(x, y, dtype)
                    self.check(y, expected(torch, self.n, count, dtype, salt), "%s x %d call %d" % (dtype, count, salt))

    def in_place(self):
        torch, count = self.torch, 12345
        y = torch.zeros(count * self.n, device="cuda", dtype=torch.float32)
        y[self.rank * count:(self.rank + 1) * count] = pattern(torch, self.rank, count, "float32", 9)
        self.stream.wait_stream(torch.cuda.current_stream())
        self.run(y[self.rank * count:(self.rank + 1) * count], y, "float32")
        self.check(y, expected(torch, self.n, count, "float32", 9), "in place")

    def graph(self):
        """A call captured into a CUDA graph (its context made by an eager call first), replayed."""
        torch, count = self.torch, 1 << 18
        x = pattern(torch, self.rank, count, "float32", 0)
        y = torch.zeros(count * self.n, device="cuda", dtype=torch.float32)
        self.stream.wait_stream(torch.cuda.current_stream())
        self.run(x, y, "float32")
        self.stream.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=self.stream):
            self.algo.execute(self.comm.communicator, x.data_ptr(), y.data_ptr(), x.nbytes, y.nbytes,
                              self.mscclpp.DataType.float32, stream=self.stream.cuda_stream)
        for salt in (4, 5):
            with torch.cuda.stream(self.stream):
                x.copy_(pattern(torch, self.rank, count, "float32", salt))
                y.zero_()
                g.replay()
            self.check(y, expected(torch, self.n, count, "float32", salt), "graph replay %d" % salt)

    def timing(self, iters=20):
        torch, count = self.torch, 16 << 20
        x = pattern(torch, self.rank, count, "float16", 0)
        y = torch.zeros(count * self.n, device="cuda", dtype=torch.float16)
        self.stream.wait_stream(torch.cuda.current_stream())
        self.run(x, y, "float16")
        self.stream.synchronize()
        self.comm.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            self.run(x, y, "float16")
        self.stream.synchronize()
        dt = (time.perf_counter() - t0) / iters
        self.check(y, expected(torch, self.n, count, "float16", 0), "timing")
        return "allgather of %d MiB per rank: %.1f us, busbw %.1f GB/s" % (
            x.nbytes >> 20, dt * 1e6, x.nbytes * (self.n - 1) / dt / 1e9)


def rank_main(rank, n, port, q):
    try:
        import torch

        torch.cuda.set_device(rank % torch.cuda.device_count())
        import mscclpp
        r = Rank(torch, mscclpp, rank, n, port)
        r.sizes_and_dtypes()
        r.in_place()
        r.graph()
        info = r.timing()
        calls = r.calls
        r.comm.barrier()
        r.comm.close()  # the algorithm's contexts and connections go with the communicator
        q.put((rank, None, "%d calls checked; %s" % (calls, info)))
    except BaseException as e:  # noqa: BLE001 - the parent reports it
        q.put((rank, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()), None))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--nranks", type=int, default=0, help="ranks (default: one per GPU)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds to wait for the ranks")
    args = ap.parse_args()
    import torch

    import mscclpp
    ngpus = torch.cuda.device_count()
    n = args.nranks or ngpus
    if n < 2:
        sys.exit("gpu_native_check: needs at least 2 ranks (%d GPU(s) here; -n 2 shares one GPU, correctness only)"
                 % ngpus)
    mod = mscclpp.compile_native(name="customized_allgather", file=EXAMPLE)
    print("gpu_native_check: %d ranks on %d GPU(s); %s (%s)" % (n, ngpus, mod.__file__,
                                                               "compiled" if mod.compiled else "cached"), flush=True)
    ctx = mp.get_context("spawn")
    q, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=rank_main, args=(r, n, port, q)) for r in range(n)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in procs:
            rank, err, info = q.get(timeout=args.timeout)
            results[rank] = (err, info)
    except Exception:  # noqa: BLE001 - a rank that never reports
        pass
    for p in procs:
        p.join(30)
        if p.is_alive():
            p.kill()
    ok = len(results) == n and all(err is None for err, _ in results.values())
    for rank in range(n):
        err, info = results.get(rank, ("no report (hung or crashed)", None))
        print("rank %d: %s" % (rank, info if err is None else "FAILED: " + err), flush=True)
    print("gpu_native_check: %s" % ("OK" if ok else "FAILED"), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
