"""mscclpp.compile: a DSL algorithm (seed 001's approach 2) as an Algorithm.

    algo = mscclpp.compile(algo=allreduce_fn, algo_spec=spec, rank=rank)
    algo.execute(comm, x, y, x.nbytes, y.nbytes, dtype, executor=executor)

allreduce_fn(spec) returns a program (mscclpp.language's CollectiveProgram, or anything with
to_json()); its JSON plan is cached in $MSCCLPP_CACHE_DIR/dsl/<key>.json (default
~/.cache/mscclpp), the key a hash of the function's source and the spec's fields, so a later
compile of the same function and spec loads the plan without running the function."""
import dataclasses
import enum
import hashlib
import inspect
import json
import os
import tempfile

from mscclpp.native import cache_dir


def _stable(obj, depth=0):
    """A JSON-able description of obj that does not change between runs (no addresses)."""
    if depth > 20:
        return "..."
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, enum.Enum):
        return "%s.%s" % (type(obj).__name__, obj.name)
    if isinstance(obj, (list, tuple)):
        return [_stable(x, depth + 1) for x in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((_stable(x, depth + 1) for x in obj), key=repr)
    if isinstance(obj, dict):
        return {str(k): _stable(v, depth + 1) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    elif hasattr(obj, "__dict__"):
        fields = {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    else:
        return "%s:%s" % (type(obj).__name__, str(obj))
    return {"__type__": type(obj).__qualname__, **{k: _stable(v, depth + 1) for k, v in sorted(fields.items())}}


def _source(fn):
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):  # defined in a REPL or built in: its code object stands in
        code = getattr(fn, "__code__", None)
        return repr((getattr(fn, "__qualname__", repr(fn)), code.co_code if code else None,
                     code.co_consts if code else None))


def plan_key(algo, algo_spec, kwargs=None):
    """The cache key of algo (its qualified name and source) with algo_spec (its fields) and the
    keyword arguments it gets."""
    desc = {"format": 1, "algo": getattr(algo, "__qualname__", repr(algo)), "source": _source(algo),
            "spec": _stable(algo_spec), "kwargs": _stable(kwargs or {})}
    return hashlib.sha256(json.dumps(desc, sort_keys=True, default=str).encode()).hexdigest()[:40]


def _write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _plan_json(algo, algo_spec, kwargs):
    program = algo(algo_spec, **kwargs)
    if not hasattr(program, "to_json"):
        raise TypeError("mscclpp.compile: %r returned %r, not a program with to_json()" % (algo, type(program)))
    text = program.to_json()
    return text if isinstance(text, str) else json.dumps(text)


class _PlanRunner:
    """Algorithm.execute's implementation for a plan: through the given executor, or an Executor of
    the last communicator seen."""

    def __init__(self, plan):
        self.plan, self._comm, self._executor = plan, None, None

    def __call__(self, comm, input_buffer, output_buffer, input_size, output_size, dtype, op, stream, executor,
                 nblocks, nthreads_per_block, extras, root):
        del op, nblocks, nthreads_per_block, extras, root  # the plan fixes all of them
        if executor is None:
            if self._comm is not comm:
                from mscclpp import Executor
                self._comm, self._executor = comm, Executor(comm)
            executor = self._executor
        executor.execute(self.plan, input_buffer, output_buffer, -1 if input_size is None else input_size,
                         -1 if output_size is None else output_size, int(dtype), stream)


def compile(algo, algo_spec, rank=0, **kwargs):  # noqa: A001 - seed 001's name
    """The Algorithm of algo(algo_spec, **kwargs)'s plan (see the module's doc). rank: this
    process's rank (the plan holds every rank's part, so it does not change the plan or the key).
    Raises what algo raises, TypeError when it returns no program, and the plan loader's ValueError
    or RuntimeError for a plan it refuses (the cached file is removed then)."""
    del rank
    if not callable(algo):
        raise TypeError("mscclpp.compile: algo must be callable (a function taking the spec), got %r" % (algo,))
    from mscclpp import Algorithm, ExecutionPlan
    path = cache_dir("dsl") / (plan_key(algo, algo_spec, kwargs) + ".json")
    from_cache = path.exists()
    if not from_cache:
        _write_atomic(path, _plan_json(algo, algo_spec, kwargs))
    name = str(getattr(algo_spec, "name", None) or getattr(algo, "__name__", "dsl_plan"))
    try:
        plan = ExecutionPlan(str(path))
    except (ValueError, RuntimeError):
        path.unlink(missing_ok=True)
        raise
    algorithm = Algorithm(plan.name or name, plan.collective, _impl=_PlanRunner(plan))
    algorithm.plan, algorithm.cache_file, algorithm.from_cache = plan, str(path), from_cache
    return algorithm
