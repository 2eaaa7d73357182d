"""CuPy's cupy.cuda.nccl on libmscclpp_nccl.so, one process per GPU, every result checked; and a
vLLM-style use: the NCCL library loaded with ctypes and an allreduce captured in a CUDA graph.

    LD_PRELOAD=build/lib/libmscclpp_nccl.so mscclpp-run -n N python3 tests/nccl/cupy_nccl.py IDFILE

(IDFILE: where rank 0 leaves the unique id for the others; the launch's port is appended.)"""
import ctypes
import os
import sys
import time

import cupy as cp
from cupy.cuda import nccl


def share_id(rank, path):
    """The id as CuPy takes it (bytes; older CuPy returned a tuple of signed chars)."""
    if rank == 0:
        uid = bytes(v & 0xff for v in nccl.get_unique_id())
        with open(path + ".tmp", "wb") as f:
            f.write(uid)
        os.rename(path + ".tmp", path)
        return uid
    for _ in range(6000):
        if os.path.exists(path):
            return open(path, "rb").read()
        time.sleep(0.01)
    sys.exit("no unique id at %s" % path)


def check(name, got, want):
    if not cp.array_equal(got, want):
        sys.exit("rank %s: %s: %d wrong elements" % (os.environ["MSCCLPP_RANK"], name, int((got != want).sum())))


def vllm_style(rank, n, uid_bytes, dev):
    """As vLLM's PyNcclCommunicator: ctypes on libnccl.so.2, ncclCommInitRank, an allreduce on a
    stream captured into a CUDA graph and replayed."""
    lib = ctypes.CDLL("libnccl.so.2")
    comm = ctypes.c_void_p()

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_byte * 128)]

    uid = UniqueId()
    ctypes.memmove(ctypes.addressof(uid), uid_bytes, 128)
    assert lib.ncclCommInitRank(ctypes.byref(comm), n, uid, rank) == 0, lib.ncclGetLastError(None)
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.full(4096, float(rank + 1), dtype=cp.float32)
    with s:
        assert lib.ncclAllReduce(ctypes.c_void_p(x.data.ptr), ctypes.c_void_p(x.data.ptr), ctypes.c_size_t(4096),
                                 7, 0, comm, ctypes.c_void_p(s.ptr)) == 0
        s.synchronize()
        s.begin_capture()
        lib.ncclAllReduce(ctypes.c_void_p(x.data.ptr), ctypes.c_void_p(x.data.ptr), ctypes.c_size_t(4096), 7, 0, comm,
                          ctypes.c_void_p(s.ptr))
        graph = s.end_capture()
    total = n * (n + 1) / 2
    for rep in range(3):
        x.fill(float(rank + 1) * (rep + 2))
        graph.launch(s)
        s.synchronize()
        check("vllm-style graph replay %d" % rep, x, cp.full(4096, total * (rep + 2), dtype=cp.float32))
    lib.ncclCommDestroy(comm)


def main():
    rank, n = int(os.environ["MSCCLPP_RANK"]), int(os.environ["MSCCLPP_WORLD_SIZE"])
    path = "%s.%s" % (sys.argv[1], os.environ.get("MSCCLPP_MASTER_PORT", "0"))
    dev = int(os.environ.get("MSCCLPP_LOCAL_RANK", rank))
    cp.cuda.Device(dev).use()
    uid = share_id(rank, path)
    comm = nccl.NcclCommunicator(n, uid, rank)
    assert comm.size() == n and comm.rank_id() == rank and comm.device_id() == dev
    s = cp.cuda.Stream.null.ptr

    def x(count, k=None, dtype=cp.float32):
        k = rank if k is None else k
        return (cp.arange(count, dtype=cp.float64) % 7 + 3 * (k + 1)).astype(dtype)

    a = x(1000)
    comm.allReduce(a.data.ptr, a.data.ptr, 1000, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, s)
    check("allReduce", a, sum(x(1000, k) for k in range(n)))
    b = x(500)
    comm.bcast(b.data.ptr, 500, nccl.NCCL_FLOAT32, n - 1, s)
    check("bcast", b, x(500, n - 1))
    r = cp.empty(500, dtype=cp.float32)
    comm.reduce(x(500).data.ptr, r.data.ptr, 500, nccl.NCCL_FLOAT32, nccl.NCCL_MAX, 0, s)
    if rank == 0:
        check("reduce max", r, x(500, n - 1))
    g = cp.empty(300 * n, dtype=cp.float32)
    src = x(300)
    comm.allGather(src.data.ptr, g.data.ptr, 300, nccl.NCCL_FLOAT32, s)
    check("allGather", g, cp.concatenate([x(300, k) for k in range(n)]))
    rs = cp.empty(200, dtype=cp.float32)
    big = x(200 * n)
    comm.reduceScatter(big.data.ptr, rs.data.ptr, 200, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, s)
    check("reduceScatter", rs, sum(x(200 * n, k) for k in range(n))[rank * 200:(rank + 1) * 200])
    got = cp.empty(256, dtype=cp.float32)
    out = x(256)
    nccl.groupStart()
    comm.send(out.data.ptr, 256, nccl.NCCL_FLOAT32, (rank + 1) % n, s)
    comm.recv(got.data.ptr, 256, nccl.NCCL_FLOAT32, (rank - 1) % n, s)
    nccl.groupEnd()
    check("send/recv in a group", got, x(256, (rank - 1) % n))
    cp.cuda.Stream.null.synchronize()
    comm.destroy()

    uid2 = share_id(rank, path + ".vllm")
    vllm_style(rank, n, uid2, dev)
    if rank == 0:
        os.unlink(path)
        os.unlink(path + ".vllm")
        print("cupy_nccl: CuPy's calls and a vLLM-style graph capture passed on %d ranks (version %d)" %
              (n, nccl.get_version()), flush=True)


if __name__ == "__main__":
    main()
