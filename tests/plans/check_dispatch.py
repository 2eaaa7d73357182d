#!/usr/bin/env python3
"""Every plan op is handled explicitly by both interpreters: for each dispatch switch named in
DISPATCH below, the function's switch lists a `case PLAN_OP_<X>:` for every op of PLAN_OPS
(src/plan/plan.h), names no op that does not exist, and has no `default:` (so an op added to
PLAN_OPS and missed here is a finding, not a silent fall-through to another op's code). gcc's
-Wswitch-enum checks the host switches at build time; nvcc does not warn for device code, which is
why this test reads the sources.

    check_dispatch.py SRC_DIR      exit 0 when every switch is complete, 1 with the findings
    check_dispatch.py --self-test  shows that a missing case and a default are both caught
"""
import os
import re
import sys
import tempfile

# (file under src/, function whose switch dispatches plan ops)
DISPATCH = [
    ("exec/cpu/ops.c", "exec_op"),
    ("exec/gpu/kernel.cu", "xk_op_lean"),
    ("exec/gpu/kernel.cu", "xk_op"),
    ("exec/gpu/dev.h", "xg_op_lean"),
]


def plan_ops(src):
    """The op names of PLAN_OPS (a macro continued over lines with backslashes), in order."""
    text = open(os.path.join(src, "plan/plan.h")).read().replace("\\\n", " ")
    m = re.search(r"^#define PLAN_OPS\(X\)(.*)$", text, re.M)
    return re.findall(r"X\((\w+),", m.group(1)) if m else []


def function_body(text, name):
    """The text of function `name`'s body (braces balanced), or None."""
    m = re.search(r"\b" + re.escape(name) + r"\s*\([^;{]*\)\s*\{", text)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def check(src):
    ops = plan_ops(src)
    findings = [] if ops else ["src/plan/plan.h: no PLAN_OPS list found"]
    for rel, fn in DISPATCH:
        path = os.path.join(src, rel)
        body = function_body(strip_comments(open(path).read()), fn)
        if body is None:
            findings.append(f"src/{rel}: no function {fn}")
            continue
        cases = re.findall(r"\bcase\s+PLAN_OP_(\w+)\s*:", body)
        for op in ops:
            if op not in cases:
                findings.append(f"src/{rel}: {fn} has no case for PLAN_OP_{op}")
        for op in sorted(set(cases) - set(ops)):
            findings.append(f"src/{rel}: {fn} has a case for PLAN_OP_{op}, which PLAN_OPS does not list")
        if re.search(r"\bdefault\s*:", body):
            findings.append(f"src/{rel}: {fn} has a default: an op it does not list would run as something else")
    return ops, findings


def run(src):
    ops, findings = check(src)
    for f in findings:
        print(f)
    print(f"op dispatch: {len(ops)} plan ops, {len(DISPATCH)} switches, {len(findings)} finding(s)")
    return 1 if findings else 0


def self_test():
    """A copy of the switches with one case taken out and a default added must give both findings."""
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "..", "..", "src")
    with tempfile.TemporaryDirectory() as tmp:
        for rel in {r for r, _ in DISPATCH} | {"plan/plan.h"}:
            os.makedirs(os.path.join(tmp, os.path.dirname(rel)), exist_ok=True)
            text = open(os.path.join(src, rel)).read()
            if rel == "exec/cpu/ops.c":
                text = text.replace("case PLAN_OP_UPKT:", "default:", 1)
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(text)
        _, got = check(tmp)
        want = ["exec_op has no case for PLAN_OP_UPKT", "exec_op has a default"]
        if len(got) != len(want) or not all(any(w in g for g in got) for w in want):
            print(f"self-test: expected {want}, found {got[:5]} ({len(got)} in all)")
            return 1
    print("self-test: a missing case and a default are both found")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(run(sys.argv[1]))
