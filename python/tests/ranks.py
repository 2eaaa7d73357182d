"""What the tests share: the plan corpus of the C tests, a free port, and ranks as processes
(multiprocessing, spawn) that report (rank, error text or None) on a queue."""
import multiprocessing as mp
import os
import socket
import subprocess
import sys

GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "plans", "gen_plans.py")


def generate_corpus(out):
    """The C tests' plan corpus (tests/plans/gen_plans.py) written into out."""
    subprocess.run([sys.executable, GEN, str(out)], check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(target, n, *args):
    """target(rank, n, port, *args, queue) in n processes meeting at 127.0.0.1:port; fails with
    every rank's error when any reports one."""
    ctx = mp.get_context("spawn")
    q, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=target, args=(r, n, port) + args + (q,)) for r in range(n)]
    for p in procs:
        p.start()
    results = dict(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    bad = {r: e for r, e in results.items() if e}
    assert not bad, bad
