"""Init from the environment under a real torchrun, whose agent already holds MASTER_PORT with its
TCPStore: the library exchanges its unique id through that store instead of binding the port
(src/bootstrap/launch_store.c). A C program (tests/mp/bootstrap_launcher.c from the build's bin/)
and mscclpp.CommGroup() next to torch's own init_process_group both start; when rank 0 cannot start
its root, every rank fails within seconds, naming why. Skipped without torch or the C build."""
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def launcher_binary():
    for d in (os.environ.get("MSCCLPP_TOOL_DIR"), ROOT / "build" / "bin", ROOT / "build-cpu" / "bin"):
        if d and (Path(d) / "bootstrap_launcher").is_file():
            return Path(d) / "bootstrap_launcher"
    pytest.skip("bootstrap_launcher not built (make build, or set MSCCLPP_TOOL_DIR)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(*args, nproc=3, timeout=120):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={nproc}",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}", *map(str, args)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MSCCLPP_RANK_KIND": "cpu"}
    for var in ("MSCCLPP_MASTER_PORT", "MSCCLPP_MASTER_ADDR", "MSCCLPP_RANK", "MSCCLPP_WORLD_SIZE"):
        env.pop(var, None)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          env=env, cwd=ROOT)


def test_c_program_under_torchrun():
    proc = torchrun("--no-python", launcher_binary())
    assert proc.returncode == 0, proc.stdout[-4000:]
    for r in range(3):
        assert "rank %d of 3: ok" % r in proc.stdout, proc.stdout[-4000:]


def test_root_failure_reaches_every_rank_at_once():
    proc = torchrun("--no-python", launcher_binary(), "fail-root")
    assert proc.returncode != 0
    failed = dict(re.findall(r"rank (\d): init failed after ([0-9.]+) s", proc.stdout))
    # torchrun stops the other ranks once one exits; those that got as far as their init failed
    # within seconds, with rank 0's reason
    assert "0" in failed and len(failed) >= 2, proc.stdout[-4000:]
    assert all(float(t) < 10 for t in failed.values()), failed
    assert "MSCCLPP_SOCKET_IFNAME" in proc.stdout
    assert re.search(r"rank [12]: init failed .*rank 0 could not start the bootstrap root", proc.stdout), proc.stdout[-4000:]


SCRIPT = """
import torch.distributed as dist
import mscclpp
g = mscclpp.CommGroup()          # init from torchrun's environment, through its store
dist.init_process_group("gloo")  # torch's own client of the same store, unaffected
print("rank %d of %d: ok" % (g.my_rank, g.nranks), flush=True)
dist.barrier()
dist.destroy_process_group()
"""


def test_commgroup_beside_torch(tmp_path):
    script = tmp_path / "both.py"
    script.write_text(SCRIPT)
    proc = torchrun(script, nproc=2)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "rank 0 of 2: ok" in proc.stdout and "rank 1 of 2: ok" in proc.stdout, proc.stdout[-4000:]
