"""Native algorithms (mscclpp.compile_native, include/mscclpp/native_algorithm.h) on CPU ranks:
native/cpu_allgather.c compiled once and run on 1, 2 and 4 ranks (contexts cached by its key,
extras, release, teardown with the communicator), the on-disk cache (a second compile runs no
compiler), compiler errors, and defs the library refuses. nvcc (when installed) builds
native/bootstrap_allgather.cu, run on 2 ranks, and the GPU example (compiled only)."""
import ctypes
import gc
import os
import shutil

import numpy as np
import pytest
from ranks import run_ranks

import mscclpp
import mscclpp.native
from mscclpp import Algorithm, CommGroup, DataType, NativeCompileError, compile_native
from mscclpp.utils import numpy_dtype_to_mscclpp_dtype

HERE = os.path.dirname(os.path.abspath(__file__))
CPU_SRC = os.path.join(HERE, "native", "cpu_allgather.c")
ERRORS_SRC = os.path.join(HERE, "native", "errors.c")
CU_SRC = os.path.join(HERE, "native", "bootstrap_allgather.cu")
GPU_EXAMPLE = os.path.join(HERE, "..", "..", "examples", "torch-integration", "customized_allgather.cu")
INIT, CONTEXT, LAUNCH, CONTEXT_FREE, DESTROY, RELEASE = range(6)  # cpu_allgather.c's counters
needs_nvcc = pytest.mark.skipif(not os.path.exists(mscclpp.native._nvcc()), reason="nvcc is not installed")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh compile cache (ranks started by the test inherit it)."""
    monkeypatch.setenv("MSCCLPP_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def stats(mod):
    out = (ctypes.c_int64 * 6)()
    mod.library.cpu_allgather_stats(out)
    return list(out)


def rank_input(rank, count, dtype):
    return (np.arange(count) % 11 + 5 * rank + 1).astype(dtype)


def allgather_once(comm, algo, n, count, dtype, inplace=False, extras=None):
    """One call of algo on fresh buffers, checked against NumPy; returns the buffers (holding them
    keeps the next call's at other addresses)."""
    r = comm.my_rank
    y = np.zeros(count * n, dtype=dtype)
    x = rank_input(r, count, dtype)
    if inplace:
        y[r * count:(r + 1) * count] = x
        x = y[r * count:(r + 1) * count]
    algo.execute(comm, x, y, x.nbytes, y.nbytes, numpy_dtype_to_mscclpp_dtype(dtype), extras=extras)
    want = np.concatenate([rank_input(k, count, dtype) for k in range(n)])
    assert np.array_equal(y, want), "rank %d: %d of %d elements wrong" % (r, int((y != want).sum()), y.size)
    return x, y


def allgather_checks(comm, mod, n):
    """Calls of both factories' algorithms: contexts per key, extras, a size error, release."""
    algo = Algorithm.create_from_native_capsule(mod.create_allgather_algorithm())
    assert (algo.name, algo.collective) == ("cpu_allgather", "allgather")
    seen = np.zeros(6, dtype=np.int64)
    for count, dtype in ((1024, np.float32), (1024, np.float32), (4096, np.uint8), (100, np.float64)):
        allgather_once(comm, algo, n, count, dtype, extras={"stats": seen.ctypes.data})
    allgather_once(comm, algo, n, 1024, np.int32, inplace=True)
    # one init; contexts by output size only (4096 bytes per rank three times, then 800)
    assert list(seen[:3]) == [1, 2, 4], seen
    x, y = np.zeros(16, np.float32), np.zeros(16 * n - 1, np.float32)
    with pytest.raises(ValueError, match=r"allgather\) on %d ranks needs output_size" % n):
        algo.execute(comm, x, y, x.nbytes, y.nbytes, DataType.float32)
    algo.release(comm)  # contexts freed and destroy called now; the next call starts over
    assert stats(mod)[CONTEXT_FREE:DESTROY + 1] == [2, 1]
    allgather_once(comm, algo, n, 8, np.float32)
    by_buffers = Algorithm.create_from_native_capsule(mod.create_allgather_keyed_by_buffers())
    assert by_buffers.name == "cpu_allgather_by_buffers"
    held = [allgather_once(comm, by_buffers, n, 64, np.float32) for _ in range(2)]  # other buffers: a context each
    assert stats(mod)[:LAUNCH + 1] == [3, 5, 8]
    del held
    return algo, by_buffers


def allgather_rank(r, n, port, q):
    try:
        mod = compile_native(name="cpu_allgather", file=CPU_SRC)
        assert not mod.compiled, "the parent compiled it: ranks must find it in the cache"
        with CommGroup(interfaceIpPortTrio="127.0.0.1:%d" % port, rank=r, size=n) as comm:
            algos = allgather_checks(comm, mod, n)
        s = stats(mod)  # the communicator's teardown freed every context and called destroy
        assert s[CONTEXT_FREE] == s[CONTEXT] and s[DESTROY] == s[INIT] == 3 and s[RELEASE] == 0, s
        del algos
        gc.collect()
        assert stats(mod)[RELEASE] == 2  # both handles gone: each def's release ran once
        q.put((r, None))
    except BaseException as e:  # noqa: BLE001 - the parent reports it
        q.put((r, "%s: %s" % (type(e).__name__, e)))


@pytest.mark.parametrize("n", [2, 4])
def test_cpu_allgather(cache, n):
    assert compile_native(name="cpu_allgather", file=CPU_SRC).compiled
    run_ranks(allgather_rank, n)


def test_one_rank_and_errors(cache, tmp_path):
    """A one-rank communicator: the allgather, a size error, a launch that fails on a library call."""
    mod = compile_native(name="cpu_allgather", file=CPU_SRC)
    bad = compile_native(name="errors", file=ERRORS_SRC)
    port = __import__("ranks").free_port()
    with CommGroup(interfaceIpPortTrio="127.0.0.1:%d" % port, rank=0, size=1) as comm:
        algo = Algorithm.create_from_native_capsule(mod.create_allgather_algorithm())
        allgather_once(comm, algo, 1, 100, np.int64)
        x = np.zeros(4, np.float32)
        with pytest.raises(ValueError, match="not multiples of the 4-byte element"):
            algo.execute(comm, x, x, 6, 6, DataType.float32)
        with pytest.raises(ValueError, match="dtype 99 is not a datatype"):
            algo.execute(comm, x, x, 4, 4, 99)
        with pytest.raises(TypeError, match="extras"):
            algo.execute(comm, x, x, 16, 16, DataType.float32, extras={"a": "b"})
        failing = Algorithm.create_from_native_capsule(bad.create_failing_launch())
        with pytest.raises(ValueError, match=r"'failing_launch': launch failed on rank 0 with result 4 "
                                             r"\(invalid argument\); the callback's error: .*peer -5"):
            failing.execute(comm, x, x, x.nbytes, x.nbytes, DataType.float32)
        with pytest.raises(ValueError, match=r"needs input_size == output_size"):
            failing.execute(comm, x, x, 16, 8, DataType.float32)
    assert stats(mod)[DESTROY] == 1


def test_refused_defs(cache):
    bad = compile_native(name="errors", file=ERRORS_SRC)
    with pytest.raises(ValueError, match=r"ABI version 42, this library expects 1"):
        Algorithm.create_from_native_capsule(bad.create_wrong_abi())
    with pytest.raises(ValueError, match=r"'no_launch': launch is NULL"):
        Algorithm.create_from_native_capsule(bad.create_no_launch())
    with pytest.raises(RuntimeError, match="returned NULL"):
        bad.create_nothing()
    with pytest.raises(TypeError, match="capsule named 'mscclpp.native_algorithm'"):
        Algorithm.create_from_native_capsule(object())
    with pytest.raises(AttributeError, match=r"exports no function 'create_missing'.*MSCCLPP_NATIVE_FACTORY"):
        bad.create_missing  # noqa: B018


def test_cache(cache, tmp_path, monkeypatch):
    src = tmp_path / "copy.c"
    shutil.copy(CPU_SRC, src)
    first = compile_native(name="cpu_allgather", file=str(src))
    assert first.compiled and first.__file__.startswith(str(cache / "native"))

    def no_compiler(*args):
        raise AssertionError("the compiler ran for a cached build: %s" % (args,))

    monkeypatch.setattr(mscclpp.native, "_run_compiler", no_compiler)
    again = compile_native(name="cpu_allgather", file=str(src))
    assert not again.compiled and again.__file__ == first.__file__
    monkeypatch.undo()
    monkeypatch.setenv("MSCCLPP_CACHE_DIR", str(cache))
    src.write_text(src.read_text() + "\n/* changed */\n")
    changed = compile_native(name="cpu_allgather", file=str(src))
    assert changed.compiled and changed.__file__ != first.__file__
    flags = compile_native(name="cpu_allgather", file=str(src), extra_flags=["-DSOMETHING=1"])
    assert flags.compiled and flags.__file__ != changed.__file__


def test_compile_errors(cache, tmp_path):
    src = tmp_path / "broken.c"
    src.write_text("#include <mscclpp/native_algorithm.h>\nint f(void) { return undeclared_thing; }\n")
    with pytest.raises(NativeCompileError, match="undeclared_thing") as e:
        compile_native(name="broken", file=str(src))
    assert "undeclared_thing" in e.value.output and e.value.returncode != 0 and e.value.command
    assert not list((cache / "native").glob("*/broken.so"))  # nothing cached
    with pytest.raises(FileNotFoundError):
        compile_native(name="x", file=str(tmp_path / "none.c"))
    with pytest.raises(ValueError, match="plain file name"):
        compile_native(name="../x", file=CPU_SRC)
    txt = tmp_path / "x.txt"
    txt.write_text("")
    with pytest.raises(ValueError, match=r"\.cu, \.c"):
        compile_native(name="x", file=str(txt))


def test_paths():
    assert os.path.isfile(os.path.join(mscclpp.get_include(), "mscclpp", "native_algorithm.h"))
    assert os.path.isfile(mscclpp.get_lib()) and "libmscclpp.so" in os.path.basename(mscclpp.get_lib())


def cu_rank(r, n, port, q):
    try:
        mod = compile_native(name="bootstrap_allgather", file=CU_SRC)
        algo = Algorithm.create_from_native_capsule(mod.create_bootstrap_allgather())
        assert algo.collective == "allgather"
        with CommGroup(interfaceIpPortTrio="127.0.0.1:%d" % port, rank=r, size=n) as comm:
            for count in (1, 1000):
                allgather_once(comm, algo, n, count, np.float32)
        q.put((r, None))
    except BaseException as e:  # noqa: BLE001 - the parent reports it
        q.put((r, "%s: %s" % (type(e).__name__, e)))


@needs_nvcc
def test_cuda_file_host_code(cache):
    """A .cu file through nvcc whose host code does the work (no GPU needed)."""
    compile_native(name="bootstrap_allgather", file=CU_SRC)
    run_ranks(cu_rank, 2)


@needs_nvcc
def test_gpu_example_compiles(cache):
    """The GPU example builds (it runs on GPUs only: python/tests/native/gpu_native_check.py)."""
    mod = compile_native(name="customized_allgather", file=GPU_EXAMPLE)
    assert mod.compiled and callable(mod.create_allgather_algorithm)
    algo = Algorithm.create_from_native_capsule(mod.create_allgather_algorithm())
    assert (algo.name, algo.collective) == ("customized_allgather", "allgather")
