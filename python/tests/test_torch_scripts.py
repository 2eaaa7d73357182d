"""The torch scripts run end to end on CPU with gloo (2 processes under torchrun): the training
example (examples/torch-training/train.py, DDP and FSDP2) prints a RESULT line with a finite loss,
and the collective benchmark (python/mscclpp/torch/bench.py, run by path so the package needs no
torch backend) writes its CSV and PNG. Skipped without torch (and the plot without matplotlib)."""
import csv
import importlib.util
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "examples" / "torch-training" / "train.py"
BENCH = ROOT / "python" / "mscclpp" / "torch" / "bench.py"
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None
TINY = ["--device", "cpu", "--backend", "gloo", "--steps", "3", "--warmup", "1", "--log-every", "1",
        "--dim", "32", "--layers", "2", "--heads", "2", "--vocab", "64", "--seq", "16", "--batch", "2"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(script, *args, nproc=2, timeout=120):
    """Runs script under torchrun (this interpreter's torch.distributed.run) on 127.0.0.1; returns
    the completed process, output text in stdout."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={nproc}",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(script), *map(str, args)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc


@pytest.fixture(scope="module")
def train_runs():
    """mode -> train.py's output; each run once for the module."""
    cache = {}

    def run(mode):
        if mode not in cache:
            cache[mode] = torchrun(TRAIN, *TINY, "--mode", mode).stdout
        return cache[mode]
    return run


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_train_gloo(train_runs, mode):
    # FSDP2 (fully_shard) runs on CPU over gloo in torch 2.11: all-gather and reduce-scatter of
    # CPU tensors are both there.
    out = train_runs(mode)
    results = re.findall(r"^RESULT (.*)$", out, re.M)
    assert len(results) == 1, out[-4000:]
    fields = dict(kv.split("=", 1) for kv in results[0].split())
    assert fields["backend"] == "gloo" and fields["mode"] == mode and fields["steps"] == "3"
    assert math.isfinite(float(fields["final_loss"])) and float(fields["final_loss"]) > 0
    assert float(fields["tokens_per_s"]) > 0
    assert len(re.findall(r"^step\s+\d+\s+loss ", out, re.M)) == 3


def test_train_ddp_and_fsdp_agree(train_runs):
    """Same seed, same data: DDP and FSDP2 land on the same loss (float32, gloo)."""
    losses = [float(re.search(r"final_loss=(\S+)", train_runs(mode)).group(1)) for mode in ("ddp", "fsdp")]
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)


@pytest.mark.skipif(not HAVE_MPL, reason="matplotlib is not installed")
def test_bench_gloo(tmp_path):
    csv_path, png_path = tmp_path / "bench.csv", tmp_path / "bench.png"
    out = torchrun(BENCH, "--device", "cpu", "--backends", "gloo,gloo", "--min-bytes", "8", "--max-bytes", "2K",
                   "--factor", "4", "--warmup", "1", "--iters", "2", "--csv", csv_path, "--plot", png_path).stdout
    assert "bench: OK" in out, out[-4000:]
    rows = list(csv.DictReader(csv_path.open()))
    # 3 collectives x 2 dtypes x 5 sizes (8 .. 2K) x 2 methods, eager only on CPU.
    assert len(rows) == 3 * 2 * 5 * 2, rows[:3]
    assert {r["method"] for r in rows} == {"gloo", "gloo#2"}
    assert {r["mode"] for r in rows} == {"eager"}
    assert all(r["check"] == "ok" and float(r["us"]) > 0 for r in rows)
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
