"""The example programs of this folder, how to compile them, and how the tests run them.

Shared by python/tests/test_dsl_examples.py and scripts/dsl-golden.py. Compiling runs the example
as a program in a child process with PYTHONPATH set to a directory whose `mscclpp/language` is the
DSL under test (DSL_PATH; default the repository's python/), and reads the plan JSON it prints."""
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RANKS = (2, 4, 8)
NO_MULTICAST = ("switch channels need NVLink multicast, which is off limits on our GPUs and which CPU ranks "
                "do not have: compiled and golden-checked only")

# name -> extra command-line arguments, element-count multiples of the plan's granularity to run
# at, and why it is not run (None: it runs)
EXAMPLES = {
    "allreduce_packets": {"args": [], "multiples": (2, 64), "skip_run": None},
    "allreduce_two_shot": {"args": [], "multiples": (2, 64), "skip_run": None},
    "allreduce_ring": {"args": [], "multiples": (2, 64), "skip_run": None},
    "allreduce_pipelined": {"args": ["--unit", "256"], "multiples": (3, 97), "skip_run": None},
    "allreduce_switch": {"args": [], "multiples": (2, 64), "skip_run": NO_MULTICAST},
    "allgather": {"args": [], "multiples": (2, 64), "skip_run": None},
    "allgather_port": {"args": [], "multiples": (2, 64), "skip_run": None},
    "reducescatter": {"args": [], "multiples": (2, 64), "skip_run": None},
    "alltoall": {"args": [], "multiples": (2, 64), "skip_run": None},
}


def dsl_path():
    """The directory holding the DSL under test as mscclpp/language."""
    return os.environ.get("DSL_PATH") or str(REPO / "python")


def dsl_python():
    """The interpreter that runs the DSL (DSL_PYTHON; default this one)."""
    return os.environ.get("DSL_PYTHON") or sys.executable


def dsl_run(argv, timeout=120):
    """Run the DSL's interpreter with argv and the DSL on its path; the CompletedProcess."""
    env = dict(os.environ, PYTHONPATH=dsl_path(), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([dsl_python()] + list(argv), env=env, capture_output=True, text=True, timeout=timeout)


def compile_example(name, n):
    """Plan JSON text of example `name` for n ranks; RuntimeError with the child's error if it fails."""
    r = dsl_run([str(HERE / (name + ".py")), "--num_gpus", str(n)] + EXAMPLES[name]["args"])
    if r.returncode != 0:
        tail = "\n".join(r.stderr.strip().splitlines()[-5:])
        raise RuntimeError("%s.py --num_gpus %d failed (exit %d):\n%s" % (name, n, r.returncode, tail))
    return r.stdout[r.stdout.find("{"):]


def golden_path(name, n):
    return REPO / "python" / "tests" / "golden" / ("%s_%d.json" % (name, n))
