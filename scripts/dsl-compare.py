#!/usr/bin/env python3
"""Compare the plans of our DSL (python/mscclpp/language) with the reference MSCCL++ DSL's.

Usage: scripts/dsl-compare.py REF [--out DIR] [--ranks 2,4,8] [--only SUBSTR] [-v]

REF is a checkout of microsoft/mscclpp (a work tree, or a git directory such as the one the search
tool's fetch writes). Every program that scripts/ref-plans.py runs (language/tests/{single_node,
multi_node,unit_tests}, default_algos with both thread block group sizes, test/executor-tests/algos;
same rank counts and arguments) is run twice: with the reference DSL (a stub `mscclpp` package
holding the reference's language/ and default_algos/, which needs `sortedcontainers`), and with
ours (python/ first on PYTHONPATH; default_algos still come from the reference). One row per
program and rank count: `same` (both fail alike counts as same), `known` (ours refuses a program
on purpose, see KNOWN), or `differs` with the first differing JSON path; then a summary. With
--out, both plans of every program are written there (REF/ and OURS/). Exit status 0 when nothing
differs unexpectedly.

Normalization before comparing (parsed JSON; key order never matters):
- `remote_buffers[].access_channel_types` is compared as a set: the reference writes a Python
  set of enums there, whose order changes from run to run with string hash randomization.

Deliberate differences from the reference. None of these changes a plan of the programs above
except the refusals listed in KNOWN below; each is covered by python/tests/language:
- Refusals (a DSLError instead of a plan): a channel from a rank to itself; memory / port channels
  not paired between two ranks (the executor pairs the k-th channel of each side); signals and
  waits that do not balance per channel pair and per loop; packet ops in a Simple program; a loop
  op larger than its num_chunks; put_packets over a port channel from a non-scratch chunk (the
  loader's rules); a plan whose blocks can wait forever (circular waits, barriers not every named
  block reaches, semaphores never released, packets read before their writers run: found by
  running the replicated blocks as far as they go, so it also refuses plans that hang only under
  some timing, e.g. several blocks waiting on one channel, which the loader's check lets through);
  scratch chunks read as packets that no other op writes; chunks out of range; a switch reduce whose destination is not on the executing rank; MemoryChannel.reduce with
  no remote chunk; replication_policy=none with instances > 1 (the reference crashes with a
  TypeError). The reference writes plans for these that our loader refuses or that hang.
- Dependency barriers the reference misses: an op's own reads no longer hide an earlier op's read
  of the chunks it then writes (write after read); when an op needs a barrier, all of its accesses
  are remembered after it, not only those from the conflict on; switch ops (glre, gstore, glres)
  count their local reads and writes.
- glres writes its destination offset in `dst_buff` (the reference repeats the source offset).
- Replication also moves the packet-copy destination of recpkt / recspkt (the reference leaves it
  at the original index, so all instances would write the same packets).
- A loop body ending in a block barrier counts as synchronized at its end, not at its start (the
  reference could drop a barrier in front of such a loop).
- `access_channel_types` lists channel types in first-use order (see normalization above).
- to_json() leaves the recorded program unchanged, so it may be called again with the same result.
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OURS = HERE.parent / "python"


_NO_PACKETS = ("reads packets from scratch that no op writes (the loader: 'waits for packets in scratch that no op "
               "writes, so every call would hang')")

# Runs where the reference makes a plan and ours refuses the program, on purpose: our C loader
# (mscclpp-plan run) rejects each of these reference plans too, or the plan would hang.
KNOWN = {
    ("language/tests/multi_node/allgather_tbg.py", 2):
        "the program swaps its tbg_size and gpus_per_node arguments; at 2 ranks it opens a port channel "
        "from a rank to itself (the loader: 'connected_to ... is not another rank')",
    ("language/tests/unit_tests/flush/flush_test.py", 2):
        "a port channel 0->1 with no channel 1->0 (the loader: channels not paired)",
    ("language/tests/unit_tests/flush/flush_fuse_test.py", 2):
        "port channels 0->1 with no channels 1->0 (the loader: channels not paired)",
    ("language/tests/unit_tests/reduce_copy_send_packet_test.py", 2):
        "a memory channel 0->1 with no channel 1->0 (the loader: channels not paired)",
    ("language/tests/unit_tests/read_put_packet_test.py", 2): _NO_PACKETS,
    ("language/tests/unit_tests/reduce_copy_packet_test.py", 2): _NO_PACKETS,
    ("language/tests/unit_tests/reduce_packet/reduce_packets_test.py", 2): _NO_PACKETS,
    ("language/tests/unit_tests/reduce_packet/reduce_packets_fuse_test.py", 2): _NO_PACKETS,
    ("language/tests/unit_tests/reduce_send_packet_test.py", 2): _NO_PACKETS,
    ("language/tests/unit_tests/signal_wait/signal_wait_fuse_test.py", 2):
        "signals on channels #0,#1 but waits on channels #2,#3 of the pair (the loader: signal/wait "
        "imbalance; it would hang)",
    ("language/tests/unit_tests/signal_wait/relaxed_signal_wait_fuse_test.py", 2):
        "signals on channels #0,#1 but waits on channels #2,#3 of the pair (the loader: signal/wait "
        "imbalance; it would hang)",
}


def load_ref_plans():
    """scripts/ref-plans.py as a module: its program list, arguments and package stub."""
    spec = importlib.util.spec_from_file_location("ref_plans", HERE / "ref-plans.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_program(cmd: list, pythonpath: str) -> tuple:
    """(plan text or None, why not) of one program run."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    try:
        r = subprocess.run([sys.executable] + cmd, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        return None, last[:160]
    text = r.stdout[r.stdout.find("{"):]
    try:
        json.loads(text)
    except ValueError as e:
        return None, "printed no JSON: %s" % e
    return text, ""


def normalize(doc):
    for gpu in doc.get("gpus", []):
        for rb in gpu.get("remote_buffers", []):
            rb["access_channel_types"] = sorted(rb.get("access_channel_types", []))
    return doc


def first_difference(a, b, path="") -> str:
    """The first JSON path where a and b differ, with both values; '' if equal."""
    if type(a) is not type(b):
        return "%s: %r vs %r" % (path or "/", a, b)
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return "%s/%s: %s" % (path, k, "only in reference" if k in a else "only in ours")
            d = first_difference(a[k], b[k], "%s/%s" % (path, k))
            if d:
                return d
        return ""
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return "" if len(a) == len(b) else "%s: %d vs %d entries" % (path or "/", len(a), len(b))
    return "" if a == b else "%s: %s vs %s" % (path or "/", json.dumps(a), json.dumps(b))


def commands(rp, tree: Path, prog: Path, args: list, name: str, tbg: int, stub: Path) -> tuple:
    """(reference command, our command) for one program run."""
    if prog.parent.name == "default_algos":
        n = int(args[args.index("--num_gpus") + 1])
        tail = [prog.stem, str(n), str(n // 2), str(tbg)]
        # ours: mscclpp is our package; its default_algos subpackage is looked up in the stub too
        ours = "import mscclpp; mscclpp.__path__.append(%r)\n" % str(stub / "mscclpp") + rp.DEFAULT_ALGO_DRIVER
        return ["-c", rp.DEFAULT_ALGO_DRIVER] + tail, ["-c", ours] + tail
    cmd = [str(prog)] + (["--name", name] if "--name" in prog.read_text() else []) + args
    return cmd, cmd


def compare_one(rp, tree, prog, args, name, tbg, stub, out) -> tuple:
    """(outcome, detail) of one program at one argument set."""
    ref_cmd, our_cmd = commands(rp, tree, prog, args, name, tbg, stub)
    ref, ref_why = run_program(ref_cmd, str(stub))
    ours, our_why = run_program(our_cmd, str(OURS))
    if out:
        for sub, text in (("REF", ref), ("OURS", ours)):
            if text:
                (out / sub).mkdir(parents=True, exist_ok=True)
                (out / sub / (name + ".json")).write_text(text)
    if ref is None and ours is None:
        return "same", "both fail; reference: %s; ours: %s" % (ref_why, our_why)
    if ref is None:
        return "differs", "only ours makes a plan (reference: %s)" % ref_why
    if ours is None:
        return "differs", "ours fails: %s" % our_why
    d = first_difference(normalize(json.loads(ref)), normalize(json.loads(ours)))
    return ("differs", d) if d else ("same", "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--only", default="")
    ap.add_argument("-v", "--verbose", action="store_true", help="also print why both sides fail")
    a = ap.parse_args()
    rp = load_ref_plans()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tree = rp.export_reference(a.ref.resolve(), Path(tmp))
        stub = rp.stub_package(tree, Path(tmp))
        for prog in rp.programs(tree, True):
            if a.only and a.only not in str(prog):
                continue
            options = set(re.findall(r'add_argument\(\s*"--([a-z_]+)"', prog.read_text()))
            if prog.parent.name == "default_algos":
                options = {"num_gpus", "gpus_per_node"}
            for n in [int(x) for x in a.ranks.split(",")]:
                args = rp.program_args(options, n)
                if args is None:
                    continue
                for suffix, tbg in rp.variants(prog):
                    name = "%s_%s%s_n%d" % (prog.parent.name, prog.stem, suffix, n)
                    outcome, detail = compare_one(rp, tree, prog, args, name, tbg, stub, a.out)
                    label = str(prog.relative_to(tree)).replace("python/mscclpp/", "") + suffix
                    if outcome == "differs" and detail.startswith("ours fails") and (label, n) in KNOWN:
                        outcome, detail = "known", "%s -- reference bug: %s" % (detail, KNOWN[(label, n)])
                    rows.append((label, n, outcome, detail))
                    shown = detail if outcome != "same" or a.verbose else ("both fail" if detail else "")
                    print("%-66s %2d %-8s %s" % (label, n, outcome, shown), flush=True)
    same = sum(r[2] == "same" for r in rows)
    failing = sum(bool(r[2] == "same" and r[3]) for r in rows)
    known = sum(r[2] == "known" for r in rows)
    print("\n%d same (%d of them: both fail the same program) / %d differ: %d known (reference plans "
          "that cannot load or would hang, refused by ours), %d unexpected; %d runs"
          % (same, failing, len(rows) - same, known, len(rows) - same - known, len(rows)))
    return 0 if same + known == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
