"""The package on CPU ranks: communicators, plans and the executor through the bindings, with
NumPy buffers, results checked against NumPy. Ranks are processes started here (multiprocessing,
spawn), meeting at 127.0.0.1 on a free port; plans come from the C tests' corpus generator."""
import ctypes
import json

import numpy as np
import pytest
from ranks import generate_corpus, run_ranks

import mscclpp
from mscclpp import CommGroup, ExecutionPlan, Executor
from mscclpp.utils import numpy_dtype_to_mscclpp_dtype


def value(rank, i):
    """The input of rank at element i: small integers, so every sum and copy is exact."""
    return (rank + 1) * 3 + i % 7


def buffers(coll, n, rank, count, dtype, inplace):
    """Input and output of this rank for count elements of input (reducescatter: of output), as
    mscclpp-plan run lays them out; and the expected output."""
    x = np.array([value(rank, i) for i in range(count * (n if coll in ("reducescatter",) else 1))], dtype=dtype)
    allv = [np.array([value(r, i) for i in range(x.size)], dtype=dtype) for r in range(n)]
    if coll == "allreduce":
        want = sum(allv).astype(dtype)
        out = x if inplace else np.zeros_like(x)
    elif coll == "allgather":
        want = np.concatenate(allv)
        out = np.zeros(count * n, dtype=dtype)
        if inplace:
            out[rank * count:(rank + 1) * count] = x
            x = out[rank * count:(rank + 1) * count]
    elif coll == "reducescatter":
        want = sum(allv).astype(dtype)[rank * count:(rank + 1) * count]
        out = x[rank * count:(rank + 1) * count] if inplace else np.zeros(count, dtype=dtype)
    elif coll == "alltoall":
        c = count // n
        want = np.concatenate([allv[p][rank * c:(rank + 1) * c] for p in range(n)])
        out = x if inplace else np.zeros_like(x)
    else:
        raise ValueError(coll)
    return x, out, want


def rank_main(rank, n, port, plan_path, count, dtype_name, calls, q):
    """One rank: the plan run `calls` times; puts (rank, error text or None)."""
    try:
        dtype = np.dtype(dtype_name)
        with CommGroup(interfaceIpPortTrio="127.0.0.1:%d" % port, rank=rank, size=n) as comm:
            assert comm.my_rank == rank and comm.nranks == n
            plan = ExecutionPlan(plan_path)
            ex = Executor(comm)
            for _ in range(calls):
                x, out, want = buffers(plan.collective, n, rank, count, dtype, plan.inplace)
                ex.execute(plan, x, out, x.nbytes, out.nbytes, dtype=numpy_dtype_to_mscclpp_dtype(dtype))
                if not np.array_equal(out, want):
                    q.put((rank, "%d of %d elements wrong" % (int((out != want).sum()), want.size)))
                    return
            got = comm.all_gather_bytes(b"r%03d" % rank)
            assert got == [b"r%03d" % r for r in range(n)], got
            comm.barrier()
        q.put((rank, None))
    except Exception as e:  # noqa: BLE001 - the parent reports it
        q.put((rank, "%s: %s" % (type(e).__name__, e)))


def run_plan(n, plan_path, count, dtype="float32", calls=2):
    run_ranks(rank_main, n, plan_path, count, dtype, calls)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("plans")
    generate_corpus(out)
    return out


@pytest.mark.parametrize("name,n,count", [
    ("allreduce_allpairs_memory_n2", 2, 1024),
    ("allreduce_allpairs_ll_n4", 4, 1024),
    ("allreduce_ring_pipeline_n4", 4, 4096),
    ("allgather_inplace_memory_n4", 4, 256),
    ("reducescatter_n4", 4, 256),
    ("alltoall_n4", 4, 1024),
    ("dsl_allreduce_fused_ppkt_n4", 4, 1024),
])
def test_plan_on_cpu_ranks(corpus, name, n, count):
    run_plan(n, str(corpus / (name + ".json")), count)


def test_other_dtypes(corpus):
    run_plan(4, str(corpus / "allreduce_allpairs_memory_n4.json"), 1000, dtype="int32")
    run_plan(2, str(corpus / "allreduce_allpairs_memory_n2.json"), 1000, dtype="float64")


def test_plan_fields(corpus):
    plan = ExecutionPlan(str(corpus / "allreduce_allpairs_ll_n4.json"))
    assert (plan.name, plan.collective, plan.nranks, plan.inplace) == ("allreduce_allpairs_ll_n4", "allreduce", 4, False)
    text = (corpus / "allreduce_allpairs_ll_n4.json").read_text()
    assert ExecutionPlan(json=text, name="from_string").collective == "allreduce"


def test_errors(corpus, tmp_path):
    with pytest.raises((ValueError, RuntimeError), match="no_such_plan.json"):
        ExecutionPlan(str(tmp_path / "no_such_plan.json"))
    with pytest.raises(ValueError, match="line 1"):
        ExecutionPlan(json='{"name": ', name="broken")
    bad = json.loads((corpus / "allreduce_allpairs_memory_n2.json").read_text())
    bad["gpus"][0]["threadblocks"][0]["ops"][0]["name"] = "frobnicate"
    with pytest.raises(ValueError, match="frobnicate"):
        ExecutionPlan(json=json.dumps(bad))
    with pytest.raises(ValueError, match="one of path and json"):
        ExecutionPlan()
    with pytest.raises(ValueError, match="rank 3 of size 2"):
        CommGroup(interfaceIpPortTrio="127.0.0.1:1", rank=3, size=2)
    with pytest.raises(ValueError, match="unique_id has 3 bytes"):
        CommGroup(unique_id=b"abc", rank=0, size=1)


def test_single_rank_and_sizes(corpus):
    """A one-rank communicator from a unique id; execute's size checks."""
    with CommGroup(unique_id=mscclpp.get_unique_id(), rank=0, size=1) as comm:
        assert comm.all_gather_bytes(b"xyz") == [b"xyz"]
        ex = Executor(comm)
        plan = ExecutionPlan(str(corpus / "allreduce_allpairs_memory_n2.json"))
        x = np.ones(16, dtype=np.float32)
        with pytest.raises(ValueError, match="exceed the buffers"):
            ex.execute(plan, x, np.zeros(16, dtype=np.float32), 128, 64)
        with pytest.raises(ValueError, match="input_size and output_size"):
            ex.execute(plan, 12345, x)
    with pytest.raises(RuntimeError, match="closed"):
        comm.barrier()


def test_raw_gpu_buffer_dlpack():
    """On a machine without a GPU the buffer is host memory: NumPy takes it through DLPack, and the
    tensor keeps the memory alive after the buffer object is gone."""
    buf = mscclpp.RawGpuBuffer(4096)
    assert buf.bytes() == 4096 and buf.data_ptr() != 0
    if buf.device() >= 0:
        pytest.skip("a GPU is present: the buffer is device memory")
    a = np.from_dlpack(buf)  # read-only in NumPy (an unversioned DLPack capsule)
    assert a.dtype == np.uint8 and a.size == 4096 and a.ctypes.data == buf.data_ptr()
    ctypes.memset(buf.data_ptr(), 7, 4096)
    cap = buf.to_dlpack(data_type="torch.float32")  # the seeds' spelling
    assert "dltensor" in repr(cap)
    del cap  # an unconsumed capsule frees its tensor
    with pytest.raises(ValueError, match="not a DLPack type"):
        buf.to_dlpack(data_type="complex256")
    del buf
    assert int(a.sum()) == 7 * 4096  # still alive
