#!/usr/bin/env python3
"""The command-line tools as users meet them (CPU ranks only, no GPU needed):

  help     every tool's --help exits 0 on stdout and names each of its options
  errors   a bad option, value or command exits 2 with one stderr line naming it (printed once,
           also under mscclpp-run), a failing run exits non-zero with the library's error once
  sizes    K/M/G/KiB... sizes are taken (mscclpp-plan run --size 4K runs 4096 bytes) and junk,
           overflow and 0 are refused
  perf     an nccl-tests command line runs under mscclpp-run -n 2 and prints nccl-tests' table
           (column heads, 2 decimals, the footer lines); --nccl-symm on CPU ranks says it needs GPU
           ranks and prints ours only
  params   mscclpp-info lists every variable of docs/parameters.md (which is up to date), and bad
           values of MSCCLPP_LOG_LEVEL / integer / enumerated parameters are warned about once
  draw     mscclpp-plan draw --dot lists edges by step then rank; draw -o writes a picture, or says
           in one line how to get matplotlib or the package
  tune     mscclpp-tune refuses an unknown collective (exit 2, naming the valid ones)

    cli_tools.py AREA BINDIR SOURCEDIR [PLANDIR]"""
import os
import re
import subprocess
import sys
import tempfile

area, bindir, srcdir = sys.argv[1], sys.argv[2], sys.argv[3]
plandir = sys.argv[4] if len(sys.argv) > 4 else None
failures = []


def tool(name):
    return os.path.join(bindir, name)


def run(args, env=None, timeout=120):
    e = dict(os.environ)
    for k in ("MSCCLPP_LOG_LEVEL", "MSCCLPP_DEBUG"):  # the tools' defaults, not the caller's
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=e)


def check(cond, what, r=None):
    if not cond:
        detail = "" if r is None else "\n  exit %d\n  stdout: %s\n  stderr: %s" % (r.returncode, r.stdout[-1500:],
                                                                                    r.stderr[-1500:])
        failures.append(what + detail)
        print("FAIL: " + what + detail)


def stderr_lines(r):
    return [l for l in r.stderr.splitlines() if l.strip()]


def bad(args, needle, what, env=None):
    """args must exit 2 with exactly one stderr line that contains needle."""
    r = run(args, env)
    lines = stderr_lines(r)
    check(r.returncode == 2 and len(lines) == 1 and needle in lines[0],
          "%s: want exit 2 and one line with %r" % (what, needle), r)


HELP = {
    "mscclpp-info": ["--algorithms", "--params", "--help"],
    "mscclpp-run": ["-n", "--nnodes", "--node-rank", "--port", "--host", "--grace", "--help"],
    "mscclpp-perf": ["-b", "-e", "-f", "-i", "-s", "-n", "-w", "-c", "-d", "-o", "-r", "-G", "-a", "-T", "-J", "-t",
                     "-g", "-m", "-N", "-p", "-z", "-y", "-C", "-S", "-R", "-M", "-u", "-I", "-K", "-x", "--json",
                     "--plot", "--cpu", "--gpu", "--nccl", "--nccl-symm", "--help", "allreduce", "sendrecv"],
    "mscclpp-plan": ["validate", "run", "draw", "convert"],
    "mscclpp-plan validate": ["--strict", "--json"],
    "mscclpp-plan run": ["-n", "--size", "--dtype", "--iters", "--cpu", "--gpu", "--ll8", "--hosts"],
    "mscclpp-plan draw": ["-o", "--max-ops", "--title", "--dot"],
    "mscclpp-plan convert": ["-o"],
    "mscclpp-tune": ["--nranks", "--kind", "--collectives", "-b", "-e", "-f", "--iters", "--warmup", "--graphs",
                     "--dtype", "--no-captured", "--timeout", "--bin", "--update", "--log"],
}


def test_help():
    for name, opts in HELP.items():
        words = name.split()
        cmd = [sys.executable, tool(words[0])] if words[0] == "mscclpp-tune" else [tool(words[0])]
        r = run(cmd + words[1:] + ["--help"])
        check(r.returncode == 0 and r.stdout.startswith("usage") and not r.stderr, "%s --help: exit 0, usage" % name, r)
        for o in opts:
            check(re.search(r"(^|[\s,\[|])%s\b" % re.escape(o), r.stdout) is not None, "%s --help names %s" % (name, o))
    r = run([tool("mscclpp-plan"), "help", "run"])
    check(r.returncode == 0 and "--size" in r.stdout, "mscclpp-plan help run", r)


def test_errors():
    plan, perf, info, mrun = tool("mscclpp-plan"), tool("mscclpp-perf"), tool("mscclpp-info"), tool("mscclpp-run")
    bad([info, "--bogus"], "'--bogus'", "mscclpp-info --bogus")
    bad([mrun, "-n", "four", "true"], "'four'", "mscclpp-run -n four")
    bad([mrun, "-n", "2"], "no PROGRAM", "mscclpp-run without a program")
    bad([mrun, "--frob", "-n", "2", "true"], "'--frob'", "mscclpp-run --frob")
    bad([mrun, "-n", "2", "--nnodes", "2", "--node-rank", "2", "--port", "9", "true"], "[0, 1]", "mscclpp-run --node-rank 2")
    bad([mrun, "-n", "2", "--nnodes", "2", "--node-rank", "1", "true"], "--port", "mscclpp-run --nnodes without --port")
    env = dict(os.environ)
    env.pop("MSCCLPP_BOOTSTRAP_SECRET", None)
    bad([mrun, "-n", "2", "--nnodes", "2", "--node-rank", "1", "--port", "9", "true"], "MSCCLPP_BOOTSTRAP_SECRET",
        "mscclpp-run --nnodes without a secret", env)
    bad([plan], "no COMMAND", "mscclpp-plan alone")
    bad([plan, "frobnicate"], "'frobnicate'", "mscclpp-plan frobnicate")
    bad([plan, "run", "x.json", "-n", "four"], "'four'", "mscclpp-plan run -n four")
    bad([plan, "run", "x.json", "-n", "2", "--wat"], "'--wat'", "mscclpp-plan run --wat")
    bad([plan, "run", "x.json", "-n", "2", "--dtype", "float17"], "'float17'", "mscclpp-plan run --dtype float17")
    bad([plan, "validate", "--loose", "x.json"], "'--loose'", "mscclpp-plan validate --loose")
    bad([plan, "draw", "x.json", "--dot", "-o", "x.svg"], "--dot", "mscclpp-plan draw --dot -o")
    bad([plan, "convert"], "no FILE.xml", "mscclpp-plan convert alone")
    bad([perf, "allredcue"], "'allredcue'", "mscclpp-perf allredcue")
    bad([perf, "allreduce", "--bogus"], "'--bogus'", "mscclpp-perf --bogus")
    bad([perf, "allreduce", "-n", "x"], "'x'", "mscclpp-perf -n x")
    bad([perf, "allreduce", "-f", "1"], "-f", "mscclpp-perf -f 1")
    bad([perf, "allreduce", "-t", "2"], "mscclpp-run -n N", "mscclpp-perf -t 2")
    bad([perf, "allreduce", "-x", "1"], "not supported", "mscclpp-perf -x 1")
    bad([perf, "allreduce", "-b", "1M", "-e", "1K"], "above", "mscclpp-perf -b 1M -e 1K")
    bad([perf, "allreduce", "-R", "2"], "--nccl-symm", "mscclpp-perf -R 2 (nccl-tests' symmetric registration)")
    # Under the launcher: rank 0 explains, the launcher sums up in one line.
    r = run([mrun, "-n", "3", perf, "allreduce", "-g", "4"])
    lines = stderr_lines(r)
    check(r.returncode == 2 and len(lines) == 2 and "-g 4: not supported" in lines[0] and "ranks 0, 1, 2" in lines[1],
          "mscclpp-perf -g 4 under mscclpp-run -n 3: one error line and one launcher line", r)
    # A run that fails: exit 1 and the library's error once, without its source location.
    r = run([plan, "run", "/nonexistent/plan.json", "-n", "2"])
    lines = stderr_lines(r)
    check(r.returncode == 1 and len(lines) == 1 and "/nonexistent/plan.json" in lines[0] and ".c:" not in lines[0],
          "mscclpp-plan run on a missing plan: one line, exit 1", r)
    if plandir:
        r = run([plan, "run", os.path.join(srcdir, "tests", "xml", "ring_allreduce.xml"), "-n", "4", "--size", "64K",
                 "--iters", "1"])
        check(r.returncode == 0 and "65536 bytes" in r.stdout and "OK" in r.stdout,
              "mscclpp-plan run on an MSCCL XML file converts it in memory", r)


def test_sizes():
    plan = tool("mscclpp-plan")
    p = os.path.join(plandir, "allreduce_allpairs_memory_n4.json")
    r = run([plan, "run", p, "-n", "4", "--size", "4K,1KiB,2kb", "--iters", "1"])
    got = re.findall(r"(\d+) bytes", r.stdout)
    check(r.returncode == 0 and got == ["4096", "1024", "2048"], "--size 4K,1KiB,2kb runs 4096, 1024, 2048 bytes", r)
    for size, needle in (("4Q", "'Q' is not a unit"), ("16M7", "'M7' is not a unit"), ("0", "at least 1 byte"),
                         ("99999999999999999999", "too large"), ("-4K", "not a size"), ("", "no size")):
        bad([plan, "run", p, "-n", "4", "--size", size], needle, "--size %r" % size)
    bad([tool("mscclpp-perf"), "allreduce", "-e", "1X"], "'X' is not a unit", "mscclpp-perf -e 1X")


def test_perf():
    r = run([tool("mscclpp-run"), "-n", "2", tool("mscclpp-perf"), "allreduce", "-b", "8", "-e", "32K", "-f", "2",
             "-g", "1", "-t", "1", "-c", "1", "-n", "20", "-w", "5"])
    check(r.returncode == 0 and not r.stderr, "a pasted nccl-tests line runs", r)
    out = r.stdout.splitlines()
    heads = [l for l in out if l.startswith("#") and "size" in l and "count" in l]
    check(len(heads) == 1 and re.search(r"size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong\s+"
                                        r"time\s+algbw\s+busbw\s+#wrong", heads[0]) is not None, "column heads", r)
    check(any(l.startswith("# nThread 1 nGpus 1 minBytes 8 maxBytes 32768") for l in out), "nccl-tests' settings line", r)
    check(sum(l.startswith("#  Rank ") for l in out) == 2, "one device line per rank", r)
    rows = [l.split() for l in out if l.strip() and not l.startswith("#")]
    check(len(rows) == 13, "13 sizes from 8 to 32K by 2 (got %d rows)" % len(rows), r)
    # 2 decimals, fewer only where the column (7 wide for times, 6 for bandwidths) is too narrow
    time_re, bw_re = r"\d{1,4}\.\d\d|\d{5}\.\d|\d{6,}", r"\d{1,3}\.\d\d|\d{4}\.\d|\d{5,}"
    for f in rows:
        ok = len(f) == 13 and f[8] == f[12] == "0"
        ok = ok and all(re.fullmatch(time_re, f[k]) for k in (5, 9)) and all(re.fullmatch(bw_re, f[k]) for k in (6, 7, 10, 11))
        check(ok, "row with 2-decimal times and bandwidths: %s" % " ".join(f))
    check(any(re.fullmatch(r"# Out of bounds values : 0 OK", l) for l in out), "out of bounds footer", r)
    check(any(re.fullmatch(r"# Avg bus bandwidth    : [0-9.e+-]+", l) for l in out), "avg bus bandwidth footer", r)
    # --nccl-symm on CPU ranks: one line saying so, our rows only (no impl column, no ratio rows)
    r = run([tool("mscclpp-run"), "-n", "2", tool("mscclpp-perf"), "allreduce", "--cpu", "--nccl-symm", "-b", "8",
             "-e", "1K", "-f", "8", "-n", "2", "-w", "1"])
    out = r.stdout.splitlines()
    rows = [l.split() for l in out if l.strip() and not l.startswith("#")]
    check(r.returncode == 0 and not r.stderr and "# --nccl-symm: the NCCL comparison needs GPU ranks; these are CPU "
          "ranks, so mscclpp only" in out and len(rows) == 3 and all(len(f) == 13 for f in rows),
          "--nccl-symm on CPU ranks: a note, then ours only", r)


def test_params():
    r = run([tool("mscclpp-info"), "--params"])
    doc = open(os.path.join(srcdir, "docs", "parameters.md")).read()
    names = re.findall(r"^\| `(MSCCLPP_\w+)`", doc, re.M)
    check(r.returncode == 0 and len(names) > 30, "mscclpp-info --params", r)
    for n in names:
        check(re.search(r"^  %s\s+=" % n, r.stdout, re.M) is not None, "mscclpp-info lists %s" % n)
    for n in ("MSCCLPP_LOG_LEVEL", "MSCCLPP_LOG_SUBSYS", "MSCCLPP_LOG_FILE"):
        check(n in names, "docs/parameters.md lists %s" % n)
    r = run([sys.executable, os.path.join(srcdir, "tools", "gen_params_doc.py"), "--check", srcdir])
    check(r.returncode == 0, "docs/parameters.md is up to date with params.def", r)
    for env, needle in (({"MSCCLPP_LOG_LEVEL": "verbose"}, "MSCCLPP_LOG_LEVEL=\"verbose\" is not one of none, error, warn"),
                        ({"MSCCLPP_LOG_SUBSYS": "init,bogus"}, "\"bogus\" is not one of init"),
                        ({"MSCCLPP_BOOTSTRAP_TIMEOUT": "soon"}, "MSCCLPP_BOOTSTRAP_TIMEOUT=\"soon\" is not an integer; "
                                                                "using the default 120"),
                        ({"MSCCLPP_RANK_KIND": "tpu"}, "MSCCLPP_RANK_KIND=\"tpu\" is not one of auto, cpu, gpu")):
        r = run([tool("mscclpp-info"), "--params"], env)
        lines = [l for l in stderr_lines(r) if needle in l]
        check(r.returncode == 0 and len(lines) == 1 and len(stderr_lines(r)) == 1, "one warning: %s" % needle, r)
    r = run([tool("mscclpp-info"), "--params"], {"MSCCLPP_LOG_LEVEL": "INFO"})
    check(r.returncode == 0 and not r.stderr, "a known level in capitals is taken silently", r)


def test_draw():
    plan = tool("mscclpp-plan")
    p = os.path.join(plandir, "allreduce_allpairs_memory_n4.json")
    r = run([plan, "draw", p, "--dot"])
    edges = re.findall(r'r(\d+) -> r(\d+) \[.*label="tb(\d+)#(\d+)', r.stdout)
    keys = [(int(s), int(a), int(b), int(t)) for a, b, t, s in edges]
    check(r.returncode == 0 and len(keys) > 0 and keys == sorted(keys) and r.stdout.rstrip().endswith("}"),
          "--dot edges in step, then rank order", r)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.svg")
        r = run([plan, "draw", p, "-o", out])
        if r.returncode == 0:
            check(open(out).read().lstrip().startswith("<?xml") or "<svg" in open(out).read(), "draw -o writes SVG", r)
        else:
            lines = stderr_lines(r)
            check(r.returncode == 1 and len(lines) == 1 and "pip install" in lines[0],
                  "draw -o without matplotlib: one line saying how to install it", r)
        r = run([plan, "draw", p, "-o", out], {"PYTHON": os.path.join(tmp, "no-such-python")})
        check(r.returncode == 1 and len(stderr_lines(r)) == 1 and "no-such-python" in r.stderr,
              "draw -o with a missing interpreter names it", r)


def test_tune():
    tune = tool("mscclpp-tune")
    r = run([sys.executable, tune, "-n", "2", "--kind", "cpu", "--collectives", "allreduce,allredux", "--bin", bindir])
    lines = stderr_lines(r)
    check(r.returncode == 2 and len(lines) == 1 and "'allredux'" in lines[0] and "allgather" in lines[0],
          "mscclpp-tune --collectives allredux: exit 2 naming the valid ones", r)
    r = run([sys.executable, tune, "-n", "2", "--kind", "cpu", "-b", "4Q", "--bin", bindir])
    check(r.returncode == 2 and len(stderr_lines(r)) == 1 and "'4Q'" in r.stderr, "mscclpp-tune -b 4Q", r)


AREAS = {"help": test_help, "errors": test_errors, "sizes": test_sizes, "perf": test_perf, "params": test_params,
         "draw": test_draw, "tune": test_tune}
AREAS[area]()
if failures:
    print("cli_tools %s: %d failure(s)" % (area, len(failures)))
    sys.exit(1)
print("cli_tools %s: ok" % area)
