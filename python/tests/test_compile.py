"""mscclpp.compile (seed 001's approach 2) without the DSL: a function returning a stand-in program
whose to_json() is a plan of the C corpus. The plan's JSON is cached by the function's source and the
spec's fields (a second compile does not call the function); the Algorithm runs the plan through an
Executor (given, or made from the communicator) on 2 and 4 CPU ranks, checked against NumPy."""
import dataclasses
import enum
import json

import numpy as np
import pytest
from ranks import generate_corpus, run_ranks

import mscclpp
from mscclpp import CommGroup, DataType, Executor

CALLS = []  # (spec name) per call of a program function in this process


class Proto(enum.Enum):
    simple = "Simple"


class FakeCollective:
    """Stands in for mscclpp.language's collective objects (fields, no stable repr)."""

    def __init__(self, name, num_ranks):
        self.name, self.num_ranks = name, num_ranks


@dataclasses.dataclass(frozen=True)
class Spec:
    """The fields of mscclpp.language's AlgoSpec that matter here, plus where the plan comes from."""
    name: str
    collective: FakeCollective
    world_size: int
    plan_file: str
    protocol: Proto = Proto.simple
    instances: int = 1
    tags: dict = dataclasses.field(default_factory=dict)


class FakeProgram:
    def __init__(self, text):
        self.text = text

    def to_json(self):
        return self.text


def allreduce_program(spec):
    CALLS.append(spec.name)
    with open(spec.plan_file) as f:
        return FakeProgram(f.read())


def allreduce_program_as_dict(spec):
    """The same plan, with to_json() returning a dict (compile dumps it)."""
    CALLS.append(spec.name)
    with open(spec.plan_file) as f:
        plan = json.load(f)
    program = FakeProgram(None)
    program.to_json = lambda: plan
    return program


def spec_for(corpus, n, **kw):
    kw.setdefault("plan_file", str(corpus / ("allreduce_allpairs_memory_n%d.json" % n)))
    return Spec(name="allreduce_allpairs_memory_n%d" % n, collective=FakeCollective("allreduce", n), world_size=n,
                **kw)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MSCCLPP_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("plans")
    generate_corpus(out)
    return out


def test_cache(cache, corpus):
    del CALLS[:]
    spec = spec_for(corpus, 2)
    first = mscclpp.compile(algo=allreduce_program, algo_spec=spec, rank=0)
    assert CALLS == [spec.name] and not first.from_cache
    assert (first.name, first.collective) == (spec.name, "allreduce") and first.plan.nranks == 2
    assert first.cache_file.startswith(str(cache / "dsl"))
    again = mscclpp.compile(algo=allreduce_program, algo_spec=spec_for(corpus, 2), rank=1)
    assert CALLS == [spec.name] and again.from_cache and again.cache_file == first.cache_file
    other = mscclpp.compile(algo=allreduce_program, algo_spec=spec_for(corpus, 2, instances=2), rank=0)
    assert len(CALLS) == 2 and other.cache_file != first.cache_file  # a field changed: a new plan
    tagged = mscclpp.compile(algo=allreduce_program, algo_spec=spec_for(corpus, 2, tags={"x": 1}), rank=0)
    assert len(CALLS) == 3 and tagged.cache_file not in (first.cache_file, other.cache_file)
    as_dict = mscclpp.compile(algo=allreduce_program_as_dict, algo_spec=spec, rank=0)
    assert len(CALLS) == 4 and as_dict.cache_file != first.cache_file  # another function's source
    assert as_dict.plan.name == first.plan.name


def test_errors(cache, corpus, tmp_path):
    with pytest.raises(TypeError, match="callable"):
        mscclpp.compile(algo=None, algo_spec=spec_for(corpus, 2))
    with pytest.raises(TypeError, match="to_json"):
        mscclpp.compile(algo=lambda spec: 42, algo_spec=spec_for(corpus, 2))
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x"}')
    with pytest.raises((ValueError, RuntimeError)):
        mscclpp.compile(algo=allreduce_program, algo_spec=spec_for(corpus, 2, plan_file=str(bad)))
    assert not list((cache / "dsl").glob("*.json"))  # a plan the loader refused is not kept


def rank_main(r, n, port, corpus, q):
    try:
        algo = mscclpp.compile(algo=allreduce_program, algo_spec=spec_for(corpus, n), rank=r)
        assert algo.from_cache and not CALLS, "the parent compiled it: ranks load the cached plan"
        with CommGroup(interfaceIpPortTrio="127.0.0.1:%d" % port, rank=r, size=n) as comm:
            executor = Executor(comm)
            for count, ex in ((1024, executor), (4096, None), (1024, None)):
                x = (np.arange(count) % 5 + r).astype(np.float32)
                y = np.zeros_like(x)
                algo.execute(comm, x, y, x.nbytes, y.nbytes, DataType.float32, executor=ex)
                want = sum((np.arange(count) % 5 + k).astype(np.float32) for k in range(n))
                assert np.array_equal(y, want), "rank %d: %d wrong" % (r, int((y != want).sum()))
        q.put((r, None))
    except BaseException as e:  # noqa: BLE001 - the parent reports it
        q.put((r, "%s: %s" % (type(e).__name__, e)))


@pytest.mark.parametrize("n", [2, 4])
def test_execute(cache, corpus, n):
    mscclpp.compile(algo=allreduce_program, algo_spec=spec_for(corpus, n), rank=0)
    run_ranks(rank_main, n, corpus)
