"""python -m mscclpp.language PROGRAM.py [args]: runs a program file and writes its plan."""
import json
import os
import subprocess
import sys
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[2]

PROGRAM = '''
import argparse
from mscclpp.language.channel import *
from mscclpp.language.rank import *
from mscclpp.language.general import *
from mscclpp.language.program import *
from mscclpp.language.collectives import *

parser = argparse.ArgumentParser()
parser.add_argument("--num_gpus", type=int, default=2)
parser.add_argument("--broken", action="store_true")
args = parser.parse_args()
with CollectiveProgram("cli", AllGather(args.num_gpus, 1, False), args.num_gpus):
    print("building")  # other output before the plan is ignored
    for r in range(args.num_gpus):
        rank = Rank(r)
        rank.copy(rank.get_output_buffer()[r:r + 1], rank.get_input_buffer()[0:1], tb=0)
    if args.broken:
        MemoryChannel(1, 0).signal(tb=0)
        MemoryChannel(0, 1)
    print(JSON())
'''


def run_cli(tmp_path, *args):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    return subprocess.run([sys.executable, "-m", "mscclpp.language", *[str(a) for a in args]], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)


def test_plan_to_stdout(tmp_path):
    r = run_cli(tmp_path, "prog.py", "--num_gpus", "3")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["name"] == "cli" and len(plan["gpus"]) == 3


def test_plan_to_file(tmp_path):
    out = tmp_path / "plan.json"
    r = run_cli(tmp_path, "-o", out, "prog.py")
    assert r.returncode == 0 and r.stdout == ""
    assert json.loads(out.read_text())["collective"] == "allgather"


def test_dsl_error_is_one_line(tmp_path):
    r = run_cli(tmp_path, "prog.py", "--broken")
    assert r.returncode == 1
    assert "error:" in r.stderr and "Traceback" not in r.stderr and "rank 0" in r.stderr


def test_program_without_plan(tmp_path):
    (tmp_path / "empty.py").write_text("print('nothing')\n")
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    r = subprocess.run([sys.executable, "-m", "mscclpp.language", "empty.py"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no plan" in r.stderr
