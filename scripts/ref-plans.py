#!/usr/bin/env python3
"""Generate the reference MSCCL++ DSL's plans and run each one on CPU ranks.

Usage: scripts/ref-plans.py REF [--out DIR] [--tool PATH] [--ranks 2,4,8] [--only SUBSTR]
                                [--gen-only] [--size BYTES] [--gpu]

REF is a checkout of microsoft/mscclpp (a work tree, or a git directory such as the one the search
tool's fetch writes). The DSL needs only `sortedcontainers`; the script puts a stub `mscclpp`
package holding the reference's `language/` and `default_algos/` on PYTHONPATH, runs every program
of python/mscclpp/language/tests/{single_node,multi_node}, python/mscclpp/default_algos and
test/executor-tests/algos (with --unit, also language/tests/unit_tests) for each rank count it accepts, writes each plan under DIR, then runs
`mscclpp-plan run PLAN -n N --cpu` (plans of 2 nodes with --hosts 2, so the two halves meet over
tcp; on GPU ranks, --gpu, too: they reach the other half through port channels over tcp or net) and prints one row per plan: the program, ranks, collective, and the outcome.

With --plans DIR instead of REF it runs plans generated earlier (a GPU machine has no reference
and no DSL): every plan in DIR. --time then also times each collective plan against the built-in
algorithm of the same collective at the same sizes: mscclpp-perf (CUDA graphs on GPU ranks) with
the plan registered through MSCCLPP_PLAN_DIR, and once with no plan; the registry's trace shows that
the plan served the calls, and mscclpp-perf checks every result.

Not part of CI: it needs a checkout of the reference, which CI has no network to fetch.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM_DIRS = [
    "python/mscclpp/language/tests/single_node",
    "python/mscclpp/language/tests/multi_node",
    "python/mscclpp/default_algos",
    "test/executor-tests/algos",
]


def export_reference(ref: Path, into: Path) -> Path:
    """A work tree of the reference under `into` (copied from a work tree, or archived from git)."""
    if (ref / "python/mscclpp/language").is_dir():
        return ref
    tree = into / "ref"
    tree.mkdir()
    archive = subprocess.run(["git", "--git-dir", str(ref), "archive", "HEAD", "python", "test"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def stub_package(tree: Path, into: Path) -> Path:
    """A `mscclpp` package with only the pure-Python DSL parts, so no C extension is needed."""
    pkg = into / "pkg" / "mscclpp"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for part in ("language", "default_algos"):
        shutil.copytree(tree / "python/mscclpp" / part, pkg / part)
    return pkg.parent


# default_algos' functions, driven with the specs the reference's own __main__ blocks use (LL,
# in place where the algorithm requires it, double scratch, reused resources).
DEFAULT_ALGO_DRIVER = """
import json, sys
from mscclpp.language.collectives import AllGather, AllReduce, ReduceScatter
from mscclpp.language.utils import AlgoSpec
from mscclpp import default_algos as algos
name, n, per_node, tbg = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
kind = name.split("_multi_nodes")[0]
coll, in_place, extra = {
    "allgather": (AllGather(n, 1, False), False, {}),
    "allreduce": (AllReduce(n, 1, True), True, {"thread_block_group_size": tbg}),
    "reducescatter": (ReduceScatter(n, 1, True), True, {"thread_block_group_size": tbg}),
}[kind]
spec = AlgoSpec(name=name, collective=coll, nranks_per_node=per_node, world_size=n, in_place=in_place,
                instances=1, protocol="LL", auto_sync=False, num_threads_per_block=1024,
                reuse_resources=True, use_double_scratch_buffer=True)
print(getattr(algos, kind + "_multi_nodes")(spec, **extra).to_json())
"""


def program_args(options: set, n: int) -> list | None:
    """Command-line arguments for a program accepting `options` at n ranks; None if n does not fit."""
    multi = "gpus_per_node" in options
    if multi and n % 2:
        return None
    args = []
    if "num_gpus" in options:
        args += ["--num_gpus", str(n)]
    if multi:
        args += ["--gpus_per_node", str(n // 2)]
    if "nnodes" in options:
        args += ["--nnodes", "2"]
    if "tbg_size" in options:
        args += ["--tbg_size", "2"]
    if not ({"num_gpus", "gpus_per_node"} & options) and n != 2:
        return None  # fixed-size programs run once (they are written for 2 ranks)
    return args


def programs(tree: Path, unit: bool):
    for d in PROGRAM_DIRS + (["python/mscclpp/language/tests/unit_tests"] if unit else []):
        for f in sorted((tree / d).rglob("*.py")):
            if f.name != "__init__.py":
                yield f


def generate(prog: Path, args: list, name: str, tbg: int, pythonpath: Path, out: Path) -> tuple[Path | None, str]:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    if prog.parent.name == "default_algos":
        n = int(args[args.index("--num_gpus") + 1])
        cmd = ["-c", DEFAULT_ALGO_DRIVER, prog.stem, str(n), str(n // 2), str(tbg)]
    else:
        cmd = [str(prog)] + (["--name", name] if "--name" in prog.read_text() else []) + args
    r = subprocess.run([sys.executable] + cmd, env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        return None, "the reference program fails: " + last[:100]
    text = r.stdout[r.stdout.find("{"):]
    try:
        json.loads(text)
    except ValueError as e:
        return None, "gen printed no JSON: %s" % e
    path = out / (name + ".json")
    path.write_text(text)
    return path, ""


def run_plan(tool: str, plan: Path, n: int, hosts: int, size: str, gpu: bool) -> tuple[bool, str]:
    cmd = [tool, "run", str(plan), "-n", str(n), "--size", size, "--gpu" if gpu else "--cpu"]
    if hosts > 1:  # stand-in hosts: GPU ranks of the two halves then meet through port channels only
        cmd += ["--hosts", str(hosts)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        return False, "timed out (90 s)"
    # log lines carry a "host:pid:tid [rank] LEVEL subsys file:line: " prefix; keep the message
    lines = [re.sub(r"^\S+:\d+:\d+ \[\d+\] \w+ \w+ (\S+:\d+: )?", "", l)
             for l in (r.stdout + r.stderr).splitlines() if l.strip()]
    lines = [l.replace(str(plan) + ": ", "") for l in lines]
    if r.returncode == 0:
        return True, next((l for l in reversed(lines) if "OK" in l), "ok")[:110]
    errs = [l for l in lines if re.search(r"error|wrong|fail|refus|invalid|needs|expects", l, re.I)]
    return False, ((errs or lines or ["exit %d" % r.returncode])[0])[:200]


def auto_sizes(doc: dict, ranks: int) -> str:
    """Two per-rank input sizes every chunk count of these programs divides (12 KiB per rank and
    192 KiB), kept inside the plan's message-size range (allgather: the range is of the output)."""
    per_call = ranks if doc.get("collective") == "allgather" else 1
    lo, hi = doc.get("min_message_size", 0), doc.get("max_message_size", 2**64 - 1)
    sizes = [s for s in (12288 * ranks, 196608) if lo <= s * per_call <= hi]
    return ",".join(str(s) for s in sizes or [max(lo // per_call, 12288)])


def first_order_finding(tool: str, plan: Path) -> str:
    """The order check's first finding for a plan (a race the plan itself has), or ''."""
    r = subprocess.run([tool, "validate", str(plan)], capture_output=True, text=True, timeout=120)
    for line in r.stdout.splitlines():
        if ": order: " in line:
            return line.split(": order: ", 1)[1]
    return ""


def variants(prog: Path) -> list:
    """(name suffix, thread block group size) for each plan of a program: default_algos'
    hierarchical allreduce and reducescatter also with groups of 3 blocks."""
    if prog.parent.name == "default_algos" and not prog.stem.startswith("allgather"):
        return [("", 1), ("_tbg3", 3)]
    return [("", 1)]


PERF_COLLECTIVES = {"allreduce", "allgather", "reducescatter", "alltoall", "sendrecv", "broadcast"}


def perf_rows(tool_dir: Path, coll: str, ranks: int, sizes: str, gpu: bool, plan_dir: Path) -> tuple[dict, int, str]:
    """mscclpp-perf of coll on ranks ranks with MSCCLPP_PLAN_DIR=plan_dir: {size: (oop us, oop
    wrong, ip us, ip wrong)}, how many calls the registry served with a registered plan, and the
    first error line (or '')."""
    cmd = [str(tool_dir / "mscclpp-run"), "-n", str(ranks), str(tool_dir / "mscclpp-perf"), coll,
           "--gpu" if gpu else "--cpu", "-s", sizes, "-n", "20", "-w", "5", "-c", "1"] + (["-G", "20"] if gpu else [])
    env = dict(os.environ, MSCCLPP_PLAN_DIR=str(plan_dir), MSCCLPP_LOG_LEVEL="trace")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        return {}, 0, "timed out (300 s)"
    rows = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():
            rows[int(f[0])] = (f[5], f[8], f[9], f[12])
    served = sum("registered plan" in l for l in r.stderr.splitlines())
    errs = [l for l in (r.stdout + r.stderr).splitlines() if re.search(r"error|FAILED|invalid", l, re.I)]
    return rows, served, (errs[0][:160] if errs or r.returncode == 0 else "exit %d" % r.returncode) if errs else ""


def time_plan(a, plan: Path, doc: dict, ranks: int, builtin: dict) -> str:
    """'size: plan us / built-in us' for each timed size, the plan's column (in place or not)."""
    coll = doc.get("collective")
    if coll not in PERF_COLLECTIVES:
        return "not timed (%s)" % coll
    tool_dir = Path(a.tool).parent
    key = (coll, ranks)
    if key not in builtin:
        with tempfile.TemporaryDirectory() as empty:
            builtin[key] = perf_rows(tool_dir, coll, ranks, a.time, a.gpu, Path(empty))[0]
    with tempfile.TemporaryDirectory() as d:
        shutil.copy(plan, d)
        rows, served, err = perf_rows(tool_dir, coll, ranks, a.time, a.gpu, Path(d))
    if err:
        return "perf: " + err
    if not served:
        return "the registry never chose the plan at these sizes"
    col = (2, 3) if doc.get("inplace") else (0, 1)
    parts = []
    for size, row in sorted(rows.items()):
        base = builtin[key].get(size)
        wrong = row[col[1]]
        t, b = row[col[0]], base[col[0]] if base else "?"
        ratio = "%.2fx" % (float(b) / float(t)) if base and t not in ("N/A",) and b not in ("N/A",) else "?"
        parts.append("%s: %s us vs %s (%s)%s" % (size, t, b, ratio, "" if wrong in ("0", "N/A") else ", %s WRONG" % wrong))
    return "; ".join(parts)


def run_existing(a) -> int:
    """Every plan in a.plans on CPU or GPU ranks (and timed with --time); one row per plan."""
    rows, ok, builtin = [], 0, {}
    for plan in sorted(a.plans.glob("*.json")):
        if a.only and a.only not in plan.name:
            continue
        doc = json.loads(plan.read_text())
        ranks = len(doc.get("gpus", []))
        if ranks > a.max_ranks:
            continue
        nodes = 2 if plan.name.startswith(("multi_node", "default_algos")) else 1
        size = a.size if a.size != "auto" else auto_sizes(doc, ranks)
        passed, why = run_plan(a.tool, plan, ranks, nodes, size, a.gpu)
        if passed and a.time:
            why = time_plan(a, plan, doc, ranks, builtin)
        ok += passed
        rows.append((plan.stem, ranks, nodes, doc.get("collective", "-"), "ok" if passed else "FAIL", why))
        print("%-60s %2d %d %-14s %-7s %s" % rows[-1], flush=True)
    print("\n| plan | ranks | nodes | collective | result | %s |\n|---|---|---|---|---|---|" %
          ("time: plan vs built-in (ratio = built-in / plan)" if a.time else "detail"))
    for r in rows:
        print("| %s | %d | %d | %s | %s | %s |" % r)
    print("\n%d of %d plans ran correctly" % (ok, len(rows)))
    return 0 if ok == len(rows) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref", type=Path, nargs="?")
    ap.add_argument("--plans", type=Path, help="run the plans in this folder instead of generating them")
    ap.add_argument("--time", default="", help="with --plans: sizes (mscclpp-perf -s) to time each collective plan "
                    "at against the built-in, e.g. 64K,1M")
    ap.add_argument("--max-ranks", type=int, default=1024, help="skip plans of more ranks (GPUs on this machine)")
    ap.add_argument("--out", type=Path, default=Path("ref-plans"))
    ap.add_argument("--tool", default=str(Path(__file__).resolve().parent.parent / "build/bin/mscclpp-plan"))
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--only", default="")
    ap.add_argument("--size", default="auto", help="bytes per rank (B[,B...]), or auto: 12 KiB per rank and 192 KiB")
    ap.add_argument("--gen-only", action="store_true")
    ap.add_argument("--unit", action="store_true", help="also the DSL's unit-test programs (test plans: they run, "
                    "but what they compute has no reference to check against)")
    ap.add_argument("--gpu", action="store_true", help="run on GPU ranks instead of CPU ranks")
    a = ap.parse_args()
    if a.plans:
        return run_existing(a)
    if not a.ref:
        ap.error("give REF (a checkout of microsoft/mscclpp) or --plans DIR")
    a.out.mkdir(parents=True, exist_ok=True)
    rows, ok, made = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        tree = export_reference(a.ref.resolve(), Path(tmp))
        pythonpath = stub_package(tree, Path(tmp))
        for prog in programs(tree, a.unit):
            if a.only and a.only not in str(prog):
                continue
            options = set(re.findall(r'add_argument\(\s*"--([a-z_]+)"', prog.read_text()))
            if prog.parent.name == "default_algos":
                options = {"num_gpus", "gpus_per_node"}
            for n in [int(x) for x in a.ranks.split(",")]:
                args = program_args(options, n)
                if args is None:
                    continue
                for suffix, tbg in variants(prog):
                    name = "%s_%s%s_n%d" % (prog.parent.name, prog.stem, suffix, n)
                    plan, why = generate(prog, args, name, tbg, pythonpath, a.out)
                    nodes = 2 if "gpus_per_node" in options else 1
                    coll, ranks, result = "-", n, "no plan"
                    if plan:
                        made += 1
                        doc = json.loads(plan.read_text())
                        coll, ranks = doc.get("collective", "-"), len(doc.get("gpus", [])) or n
                        if a.gen_only:
                            passed, why = True, "generated"
                        else:
                            size = a.size if a.size != "auto" else auto_sizes(doc, ranks)
                            passed, why = run_plan(a.tool, plan, ranks, nodes, size, a.gpu)
                            race = "" if passed else first_order_finding(a.tool, plan)
                            if race:
                                why += " -- the plan's own race: " + race
                        ok += passed
                        result = "ok" if passed else "FAIL"
                    prog_name = str(prog.relative_to(tree)).replace("python/mscclpp/", "") + suffix
                    rows.append((prog_name, ranks, nodes, coll, result, why))
                    print("%-60s %2d %d %-14s %-7s %s" % rows[-1], flush=True)
    print("\n| program | ranks | nodes | collective | result | detail |\n|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %d | %s | %s | %s |" % r)
    print("\n%d of %d plans ran correctly (%d programs of the reference made no plan)" % (ok, made, len(rows) - made))
    return 0 if ok == made else 1


if __name__ == "__main__":
    sys.exit(main())
