"""Seed 001's torch examples (examples/torch-integration) on CPU ranks: the default-algorithm and
the DSL programs under torchrun with 2 processes, every result checked against gloo by the programs
themselves (the native one needs a GPU kernel). Skipped when torch is not importable."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "torch-integration"


@pytest.mark.parametrize("program", ["customized_comm_with_default_algo", "customized_comm_with_dsl"])
def test_example_on_cpu_ranks(program, tmp_path):
    env = dict(os.environ, MSCCLPP_EXAMPLE_DEVICE="cpu", MSCCLPP_CACHE_DIR=str(tmp_path), OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        str(EXAMPLES / (program + ".py"))], env=env, cwd=EXAMPLES, capture_output=True, text=True,
                       timeout=240)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "%s: OK (2 ranks)" % program in out, out[-3000:]
    assert " 0 wrong" in out, out[-3000:]
