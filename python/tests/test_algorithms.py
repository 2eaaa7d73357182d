"""The library's collectives as Algorithm objects (seed 001's interface) and the plan registry with
a selector written in Python (seed 000's), on CPU ranks in processes started here."""
import numpy as np
import pytest
from ranks import generate_corpus, run_ranks

from mscclpp import (AlgorithmCollectionBuilder, CommGroup, DataType, ExecutionPlan, ExecutionPlanRegistry, ReduceOp)


def inputs(rank, count, dtype=np.float32):
    return (np.arange(count) % 7 + 3 * (rank + 1)).astype(dtype)


def collectives(comm, algos, n, r):
    """Every collective object once, checked against NumPy."""
    by = {a.collective: a for a in algos}
    x = inputs(r, 64 * n)
    allx = [inputs(k, 64 * n) for k in range(n)]
    y = np.zeros_like(x)
    by["allreduce"].execute(comm.communicator, x, y, x.nbytes, y.nbytes, DataType.float32, ReduceOp.SUM)
    assert np.array_equal(y, sum(allx))
    g = np.zeros(64 * n * n, dtype=np.float32)
    by["allgather"].execute(comm, x, g, x.nbytes, g.nbytes, DataType.float32)
    assert np.array_equal(g, np.concatenate(allx))
    rs = np.zeros(64, dtype=np.float32)
    by["reducescatter"].execute(comm, x, rs, x.nbytes, rs.nbytes, DataType.float32, ReduceOp.MAX)
    assert np.array_equal(rs, np.maximum.reduce(allx)[r * 64:(r + 1) * 64])
    a2a = np.zeros_like(x)
    by["alltoall"].execute(comm, x, a2a, x.nbytes, a2a.nbytes, DataType.float32)
    assert np.array_equal(a2a, np.concatenate([allx[k][r * 64:(r + 1) * 64] for k in range(n)]))
    b = x.copy()
    by["broadcast"].execute(comm, b, b, b.nbytes, b.nbytes, DataType.float32, root=n - 1)
    assert np.array_equal(b, allx[n - 1])


def registry(comm, plan_path, n, r):
    """A registered plan serves the allreduce the selector picks it for; None sends it to the
    built-in algorithm; every request names the call and the candidates."""
    plan = ExecutionPlan(plan_path)
    pid = ExecutionPlanRegistry.register_plan(plan)
    assert plan.registry_id == pid and plan.name == "allreduce_allpairs_memory_n%d" % n
    seen = []

    def pick(req):
        seen.append(req)
        return plan if req["message_size"] >= 4096 else None

    ExecutionPlanRegistry.set_selector(pick)
    allreduce = [a for a in AlgorithmCollectionBuilder().build_default_algorithms() if a.collective == "allreduce"][0]
    for count in (1024, 256):  # 4 KiB: the plan; 1 KiB: built-in
        x, y = inputs(r, count), np.zeros(count, dtype=np.float32)
        allreduce.execute(comm, x, y, x.nbytes, y.nbytes, DataType.float32)
        assert np.array_equal(y, sum(inputs(k, count) for k in range(n)))
    uses = {name: u for _, name, _, u in ExecutionPlanRegistry.plans()}
    assert uses[plan.name] == 1, uses
    assert [q["message_size"] for q in seen] == [4096, 1024] and seen[0]["candidates"] == [plan.name]
    assert seen[0]["collective"] == "allreduce" and seen[0]["world_size"] == n and not seen[0]["in_place"]
    ExecutionPlanRegistry.set_selector(None)
    ExecutionPlanRegistry.clear()
    assert ExecutionPlanRegistry.plans() == []
    with pytest.raises(ValueError, match="registered already"):
        ExecutionPlanRegistry.register_plan(plan)


def rank_main(r, n, port, plan_path, q):
    try:
        # the seeds' interface:ip:port form
        with CommGroup(interfaceIpPortTrio="lo:127.0.0.1:%d" % port, rank=r, size=n) as comm:
            assert comm.communicator is comm
            algos = AlgorithmCollectionBuilder().build_default_algorithms(scratch_buffer=0, scratch_buffer_size=0, rank=r)
            assert sorted(a.name for a in algos) == sorted("default_" + c for c in AlgorithmCollectionBuilder.COLLECTIVES)
            collectives(comm, algos, n, r)
            registry(comm, plan_path, n, r)
        q.put((r, None))
    except BaseException as e:  # noqa: BLE001 - the parent reports it
        q.put((r, "%s: %s" % (type(e).__name__, e)))


@pytest.mark.parametrize("n", [2, 4])
def test_algorithms_and_registry(tmp_path, n):
    generate_corpus(tmp_path)
    run_ranks(rank_main, n, str(tmp_path / ("allreduce_allpairs_memory_n%d.json" % n)))
