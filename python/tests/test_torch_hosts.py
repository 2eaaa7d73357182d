"""The torch backend "mscclpp" across hosts, unchanged: 2 hosts made of network namespaces (a bridge
in a third one, veth links, 10.200.0.0/24, no route out), one torchrun per host (--nnodes 2, 2 CPU
ranks each, the rendezvous on host 0's veth address) running torch_hosts_worker.py: every
collective and send/recv across hosts with exact expected results, and a DDP step with gloo's
losses. The library must see 2 hosts of 2 ranks (its INFO "host identity" lines: two host hashes).
Needs root and `ip` (skipped otherwise, saying which); torch (skipped without). Every name is
unique to the run; the namespaces and whatever runs in them are removed in any case."""
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent
HOSTS, PER_HOST = 2, 2
LIMIT_S = 45  # each torchrun; the whole test stays under 60 s


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10,
                          check=check)


class Hosts:
    """HOSTS namespaces linked by veths to a bridge in a switch namespace; host h is 10.200.0.<h+1>
    on its eth0. Removes everything it made (processes first) on close()."""

    def __init__(self, n):
        self.tag = "mpt%dr%s" % (os.getpid(), secrets.token_hex(3))
        self.made = []
        self.hosts = ["%sh%d" % (self.tag, h) for h in range(n)]
        try:
            self._link(n)
        except BaseException:
            self.close()  # what was made so far
            raise

    def _link(self, n):
        sw = self._mkns(self.tag + "sw")
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "link", "set", "br0", "up")
        for h, ns in enumerate(self.hosts):
            self._mkns(ns)
            _ip("-n", sw, "link", "add", "v%d" % h, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", sw, "link", "set", "v%d" % h, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", "10.200.0.%d/24" % (h + 1), "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("netns", "exec", self.hosts[0], "true")  # can run a process in one (mounts its own /sys)

    def _mkns(self, name):
        _ip("netns", "add", name)
        self.made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")
        return name

    def kill_all(self):
        for ns in self.made:  # what still runs in a namespace of ours is ours
            for pid in _ip("netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass

    def close(self):
        self.kill_all()
        for ns in reversed(self.made):
            _ip("netns", "delete", ns, check=False)


def _make_hosts():
    if os.geteuid() != 0:
        pytest.skip("needs root to make network namespaces")
    if shutil.which("ip") is None:
        pytest.skip("no 'ip' command (iproute2)")
    try:
        return Hosts(HOSTS)
    except subprocess.CalledProcessError as e:
        pytest.skip("cannot make network namespaces here: %s: %s" % (" ".join(e.cmd), (e.output or "").strip()))


def _torchrun(hosts, h, env):
    cmd = ["ip", "netns", "exec", hosts.hosts[h], sys.executable, "-m", "torch.distributed.run",
           "--nnodes=%d" % HOSTS, "--node-rank=%d" % h, "--nproc-per-node=%d" % PER_HOST,
           "--master-addr=10.200.0.1", "--master-port=29500", str(HERE / "torch_hosts_worker.py")]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def test_torch_backend_across_two_hosts():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MSCCLPP_RANK_KIND": "cpu",
           "MSCCLPP_BOOTSTRAP_SECRET": secrets.token_hex(16),
           # gloo (torch's own group beside ours) would take the host name's address (127.0.1.1 from
           # /etc/hosts, unreachable from the other host); the library needs nothing: it picks the
           # first interface up with an IPv4 address, eth0 here (MSCCLPP_SOCKET_IFNAME not set)
           "GLOO_SOCKET_IFNAME": "eth0",
           "MSCCLPP_LOG_LEVEL": "info", "MSCCLPP_LOG_SUBSYS": "init"}
    for var in ("MSCCLPP_SOCKET_IFNAME", "MSCCLPP_MASTER_PORT", "MSCCLPP_MASTER_ADDR", "MSCCLPP_RANK",
                "MSCCLPP_WORLD_SIZE", "MSCCLPP_HOSTID", "MSCCLPP_HOST_ID", "MASTER_ADDR", "MASTER_PORT", "RANK",
                "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(var, None)
    hosts = _make_hosts()
    outs, codes = [], []
    t0 = time.monotonic()
    try:
        procs = [_torchrun(hosts, h, env) for h in range(HOSTS)]
        for p in procs:
            try:
                out, _ = p.communicate(timeout=max(1, LIMIT_S - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                hosts.kill_all()  # torchrun and its workers (in sessions of their own)
                out, _ = p.communicate(timeout=10)
                out += "\n[test: killed after %d s]" % LIMIT_S
            outs.append(out)
            codes.append(p.returncode)
    finally:
        hosts.close()
    log = "\n".join("---- host %d (status %s) ----\n%s" % (h, c, o[-6000:])
                    for h, (c, o) in enumerate(zip(codes, outs)))
    assert codes == [0] * HOSTS, log
    for r in range(HOSTS * PER_HOST):
        assert "rank %d: ok" % r in log, log
    # the library saw 2 hosts: each host's 2 ranks share one host hash, the hosts' hashes differ
    per_host = [re.findall(r"host identity: .*-> host hash ([0-9a-f]+)", o) for o in outs]
    assert [len(x) for x in per_host] == [PER_HOST] * HOSTS, log
    assert all(len(set(x)) == 1 for x in per_host) and per_host[0][0] != per_host[1][0], per_host
    # ... and counted local ranks per host: global rank h*2+l is local l of 2
    ready = [re.findall(r"rank (\d)/4 ready: CPU rank \d, local (\d)/(\d)", o) for o in outs]
    for h, lines in enumerate(ready):
        assert sorted(lines) == [(str(h * PER_HOST + l), str(l), str(PER_HOST)) for l in range(PER_HOST)], ready
