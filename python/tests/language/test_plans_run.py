"""Plans the DSL writes load and compute the right result on CPU ranks (mscclpp-plan run --cpu,
which checks the collective's output). Skipped when the tool is not built; MSCCLPP_PLAN_TOOL
names another binary."""
import os
import subprocess
from pathlib import Path

import pytest

from mscclpp.language.channel import MemoryChannel, SyncType
from mscclpp.language.collectives import AllGather, AllReduce
from mscclpp.language.loop import LoopIterationContext
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Buffer, Rank

ROOT = Path(__file__).resolve().parents[3]


def plan_tool():
    for candidate in (os.environ.get("MSCCLPP_PLAN_TOOL"), ROOT / "build-cpu/bin/mscclpp-plan",
                      ROOT / "build/bin/mscclpp-plan"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


TOOL = plan_tool()
needs_tool = pytest.mark.skipif(TOOL is None, reason="mscclpp-plan is not built")


def run_plan(tmp_path, prog, n):
    """The plan passes the tool's checks (including its order check: no races) and runs correctly."""
    path = tmp_path / "plan.json"
    path.write_text(prog.to_json())
    v = subprocess.run([TOOL, "validate", "--strict", str(path)], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0 and "order check finds" not in v.stdout + v.stderr, v.stdout + v.stderr
    r = subprocess.run([TOOL, "run", str(path), "-n", str(n), "--cpu", "--size", "12288,196608"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr


def channels(n):
    return {(p, r): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}


def read_reduce_allreduce(n, instances=1, pipelined=False):
    """Rank r sums chunk r of every input by reading peers (rre), then puts it to every peer (rres)."""
    prog = CollectiveProgram(f"ar{n}", AllReduce(n, 1, False), n, instances=instances)
    with prog:
        ch = channels(n)
        for r in range(n):
            for p in range(n):
                if p != r:
                    ch[(p, r)].signal(tb=0, relaxed=True, data_sync=SyncType.none)
            for p in range(n):
                if p != r:
                    ch[(p, r)].wait(tb=0, relaxed=True, data_sync=SyncType.after)
        for r in range(n):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            loop = LoopIterationContext(unit=4096, num_chunks=1) if pipelined else None
            if loop:
                loop.__enter__()
            rank.copy(out[r:r + 1], inp[r:r + 1], tb=0)
            for p in range(n):
                if p != r:
                    ch[(p, r)].reduce(out[r:r + 1], [Rank(p).get_input_buffer()[r:r + 1]], tb=0)
            for p in range(n):
                if p != r:
                    ch[(p, r)].put(Rank(p).get_output_buffer()[r:r + 1], out[r:r + 1], tb=0)
            if loop:
                loop.__exit__(None, None, None)
        for r in range(n):
            for p in range(n):
                if p != r:
                    ch[(p, r)].signal(tb=0, data_sync=SyncType.before)
            for p in range(n):
                if p != r:
                    ch[(p, r)].wait(tb=0, data_sync=SyncType.none)
    return prog


def packet_allgather(n):
    """Rank r sends its input as packets into every peer's scratch slot r, one block per peer,
    and unpacks what arrives; no signals (LL)."""
    prog = CollectiveProgram(f"ag{n}", AllGather(n, 1, False), n, protocol="LL", use_double_scratch_buffer=True)
    with prog:
        ch = channels(n)
        scratch = [Buffer(r, n) for r in range(n)]
        for r in range(n):
            rank = Rank(r)
            inp, out = rank.get_input_buffer(), rank.get_output_buffer()
            rank.copy(out[r:r + 1], inp[0:1], tb=0)
            for p in range(n):
                if p != r:
                    ch[(p, r)].put_packets(scratch[p][r:r + 1], inp[0:1], tb=p)
                    rank.unpack_packets(out[p:p + 1], scratch[r][p:p + 1], tb=p)
    return prog


def test_the_sample_programs_compile_without_the_tool():
    for prog in (read_reduce_allreduce(3), read_reduce_allreduce(2, 2, True), packet_allgather(3)):
        assert '"gpus"' in prog.to_json()


@needs_tool
@pytest.mark.parametrize("n", [2, 4])
def test_read_reduce_allreduce_runs(tmp_path, n):
    run_plan(tmp_path, read_reduce_allreduce(n), n)


@needs_tool
def test_replicated_pipelined_allreduce_runs(tmp_path):
    run_plan(tmp_path, read_reduce_allreduce(3, instances=2, pipelined=True), 3)


@needs_tool
def test_packet_allgather_runs(tmp_path):
    run_plan(tmp_path, packet_allgather(3), 3)
