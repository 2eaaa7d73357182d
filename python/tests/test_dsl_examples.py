"""The DSL's example programs (examples/dsl): each compiled for 2, 4 and 8 ranks must give exactly
its golden plan (python/tests/golden, made from the reference MSCCL++ DSL by scripts/dsl-golden.py),
and that plan, run on as many CPU ranks through the bindings, must compute the collective NumPy
computes; plus DSL programs that must be refused, with a message naming what is wrong.

The DSL runs in child processes: PYTHONPATH=$DSL_PATH (default: the repository's python/), whose
mscclpp/language is the DSL under test, with $DSL_PYTHON (default: this interpreter). The plans
run in this interpreter's installed package. Every test skips while that DSL cannot be imported;
the error cases also skip when the DSL under test is the reference (set DSL_ERROR_TESTS=1 to run
them anyway)."""
import json
import os
import re
import sys
import textwrap
from pathlib import Path

import pytest
from plan_check import check_plan, sizes_for

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "examples" / "dsl"))
import catalog  # noqa: E402

CASES = [(name, n) for name in catalog.EXAMPLES for n in catalog.RANKS]
IDS = ["%s-%d" % c for c in CASES]


@pytest.fixture(scope="session")
def dsl():
    """Where the DSL under test lives ({"dir", "reference"}); skips every user when it fails to import."""
    r = catalog.dsl_run(["-c", "import mscclpp.language.program as p, os; print(os.path.dirname(p.__file__))"])
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        pytest.skip("no DSL to test: mscclpp.language does not import from %s (%s)" % (catalog.dsl_path(), last))
    where = Path(r.stdout.strip().splitlines()[-1])
    head = (where / "program.py").read_text(errors="replace")[:400]
    return {"dir": where, "reference": "Microsoft Corporation" in head}


_plans = {}


def plan_text(name, n):
    """The example's plan for n ranks, compiled once per session."""
    if (name, n) not in _plans:
        _plans[name, n] = catalog.compile_example(name, n)
    return _plans[name, n]


@pytest.mark.parametrize("name,n", CASES, ids=IDS)
def test_matches_golden(dsl, name, n):
    golden = catalog.golden_path(name, n)
    assert golden.exists(), "%s is missing: scripts/dsl-golden.py writes it" % golden
    got = json.loads(plan_text(name, n))
    want = json.loads(golden.read_text())
    if got != want:  # name the first place they part, not the whole plan
        pytest.fail("%s for %d ranks differs from %s at %s" % (name, n, golden.name, first_difference(got, want)))


def first_difference(a, b, path="$"):
    """The JSON path of the first difference between a (compiled) and b (golden), with both values."""
    if type(a) is not type(b):
        return "%s: %r vs golden %r" % (path, a, b)
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return "%s.%s: %s" % (path, k, "missing" if k not in a else "not in golden")
            if a[k] != b[k]:
                return first_difference(a[k], b[k], "%s.%s" % (path, k))
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: %d items vs golden %d" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, "%s[%d]" % (path, i))
    return "%s: %r vs golden %r" % (path, a, b)


@pytest.mark.parametrize("name,n", CASES, ids=IDS)
def test_runs_on_cpu_ranks(dsl, name, n):
    """Two float32 sizes, one int32 and one float16, each launched twice (fresh buffers). Plans
    that cannot run here are only loaded (the C library must accept them)."""
    text = plan_text(name, n)
    why = catalog.EXAMPLES[name]["skip_run"]
    if why:
        from mscclpp import ExecutionPlan
        assert ExecutionPlan(json=text, name=name).nranks == n
        pytest.skip(why)
    doc = json.loads(text)
    small, large = catalog.EXAMPLES[name]["multiples"]
    f32 = sizes_for(doc, "float32", (small, large))
    cases = [(c, "float32") for c in f32] + [(sizes_for(doc, "int32", (large,))[0], "int32"),
                                            (sizes_for(doc, "float16", (small,))[0], "float16")]
    check_plan(text, n, cases)


# DSL programs that must be refused: (program, regexes the exception's message must all match)
HEAD = """
from mscclpp.language.channel import MemoryChannel
from mscclpp.language.collectives import AllReduce
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Rank
with CollectiveProgram("bad", AllReduce(2, 1, True), 2):
"""
ERRORS = {
    "signal_without_wait": ("""
        MemoryChannel(1, 0).signal(tb=0)
        MemoryChannel(0, 1)
        JSON()""", [r"(?i)signal", r"(?i)wait", r"\b0\b", r"\b1\b"]),
    "wait_without_signal": ("""
        a, b = MemoryChannel(1, 0), MemoryChannel(0, 1)
        a.signal(tb=0)
        b.wait(tb=0)
        b.wait(tb=0)
        JSON()""", [r"(?i)signal", r"(?i)wait"]),
    "chunk_out_of_range": ("""
        Rank(0).get_input_buffer()[1:3]""", [r"(?i)out of (bounds|range)|exceed|beyond", r"\b3\b",
                                                    r"(?i)\binput\b|buffer i\b"]),
    "rank_out_of_range": ("""
        MemoryChannel(5, 0)""", [r"(?i)rank", r"\b5\b", r"(?i)out of (bounds|range)|exceed|beyond"]),
    "put_size_mismatch": ("""
        MemoryChannel(1, 0).put(Rank(1).get_input_buffer()[0:2], Rank(0).get_input_buffer()[0:1], tb=0)""",
                          [r"(?i)size|chunks", r"\b1\b", r"\b2\b"]),
}

RUN_ONE = """
import json, sys, traceback
try:
    exec(compile(sys.argv[1], "program", "exec"))
    print(json.dumps({"raised": None}))
except Exception as e:
    print(json.dumps({"raised": type(e).__name__, "message": str(e)}))
"""


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_dsl_refuses(dsl, case):
    if dsl["reference"] and os.environ.get("DSL_ERROR_TESTS") != "1":
        pytest.skip("the DSL under test is the reference; these check our DSL's messages (DSL_ERROR_TESTS=1 runs them)")
    body, patterns = ERRORS[case]
    program = HEAD + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"
    r = catalog.dsl_run(["-c", RUN_ONE, program])
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["raised"], "%s: the DSL accepted the program" % case
    for pattern in patterns:
        assert re.search(pattern, got["message"]), \
            "%s: %s: %r does not match %r" % (case, got["raised"], got["message"], pattern)
