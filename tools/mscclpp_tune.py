#!/usr/bin/env python3
"""mscclpp-tune: re-makes the selection rules of tuning/algo.tsv from measurements on this machine.

For each collective it runs mscclpp-perf once per built-in algorithm of the rank kind, forced with
MSCCLPP_ALGO (out-of-place times, CUDA graphs on GPU ranks), picks the fastest algorithm at every
size, merges neighbouring sizes with the same winner into rules, and prints them as algo.tsv rows
for exactly this number of ranks (or writes them into the table with --update, ahead of the rules
they replace, with a comment saying where and when they were measured). With --dtype the runs use
that datatype (float otherwise) and the rules serve it alone (algo.tsv's datatype column): they go
ahead of the rules for every datatype, which a later run without --dtype keeps behind them.
On GPU ranks the captured-only algorithms (zero copy) are timed too (every run is
CUDA-graph timed, i.e. captured): where one of them is the fastest of all, a rule with both bounds
names it ahead of the others; the selection skips such rules for calls outside capture, which
then take the fastest of the other algorithms (--no-captured leaves them out). Those other
algorithms are timed a second time outside graphs (eager calls, as most PyTorch training makes
them), and their rules follow the eager times; --no-eager makes them from the graph runs instead
(half the runs, for a table serving captured calls).

  mscclpp-tune.py -n 4 [--kind gpu] [--collectives allreduce,allgather] [-b 8 -e 256M -f 4]
                  [--dtype half] [--iters 20 --warmup 5 --graphs 10] [--no-eager] [--skip REGEX]
                  [--tolerance 0] [--bin DIR]
                  [--update tuning/algo.tsv]

A run that fails is not printed in full: at the end one line says how many failed, the first
failure's last line of output, and the log file that holds all their output; the exit status is
then 1 (the rules of what ran are still printed and written). A bad option or value exits 2.
"""
import argparse
import datetime
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

UNITS = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]
COLLECTIVES = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"]
DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3",
          "f8e5m2"]
WARM_SIZES = 2  # warm-up sizes ahead of each run's own (run_sizes)
PERF_MAX_SIZES = 64  # the most sizes mscclpp-perf -s takes
SIZE_RE = re.compile(r"^[0-9]+([kmgt](i?b)?|b)?$", re.IGNORECASE)


def fmt_bytes(n):
    """Bytes as algo.tsv writes them: 64K, 2M, 1G when exact, else plain."""
    for size, suffix in UNITS:
        if n >= size and n % size == 0:
            return "%d%s" % (n // size, suffix)
    return str(n)


def winners(times, tolerance=0.0):
    """times: {algorithm: {bytes: us}}. Returns [(bytes, algorithm)] for every size measured by
    at least one algorithm, the fastest (on ties the previous size's winner, else the first listed);
    sizes no algorithm measured are left out. tolerance (a fraction): the previous size's winner keeps
    a size where it is within that much of the fastest, so that noise between near-equal algorithms
    does not split the rules."""
    sizes = sorted({b for per in times.values() for b in per})
    out = []
    for b in sizes:
        best = None
        for algo, per in times.items():
            if b in per and (best is None or per[b] < times[best][b]):
                best = algo
        prev = out[-1][1] if out else None
        if prev is not None and b in times[prev] and times[prev][b] <= times[best][b] * (1.0 + tolerance):
            best = prev
        out.append((b, best))
    return out


def rules(win):
    """[(bytes, algorithm)] sorted by size -> [(max_bytes or None, algorithm)]: one rule per run of
    equal winners, bounded by the run's largest size; the last rule is unbounded (None)."""
    out = []
    for b, algo in win:
        if out and out[-1][1] == algo:
            out[-1] = (b, algo)
        else:
            out.append((b, algo))
    if out:
        out[-1] = (None, out[-1][1])
    return out


def captured_rules(win, captured_only):
    """[(bytes, algorithm)] of every algorithm, sorted by size -> [(min_bytes, max_bytes or None,
    algorithm)] for the runs whose winner is captured-only: both bounds, since these rules stand
    ahead of the others (a run covers the sizes above the previous run's largest)."""
    out, lo = [], 0
    runs = rules(win)
    for i, (mx, algo) in enumerate(runs):
        if algo in captured_only:
            out.append((lo, mx, algo))
        if mx is not None:
            lo = mx + 1
    return out


def make_rules(times, captured_only, eager_times=None, tolerance=0.0):
    """The rules of one collective: times {algorithm: {bytes: us}} of every algorithm (on GPU ranks
    timed in graphs), captured_only the names that serve captured calls alone, eager_times the
    others timed outside graphs (None: not timed so). Captured-only winners of times first (both
    bounds), then the fastest of the others at each size, by eager_times when given."""
    others = eager_times if eager_times is not None else {a: t for a, t in times.items() if a not in captured_only}
    return captured_rules(winners(times, tolerance), captured_only) + rules(winners(others, tolerance))


def tsv_rows(coll, kind, nranks, rule_list, dtype=None):
    """Rows of rules [(max_bytes or None, algorithm)] (min 0) or [(min, max or None, algorithm)],
    for one host (hosts=1: the runs are on one host, so the rules of several hosts stay in force)."""
    rows = []
    for r in rule_list:
        lo, mx, algo = r if len(r) == 3 else (0, r[0], r[1])
        rows.append("%-14s %-5s %-9d %-10d %-10s %-10s %s %s hosts=1" % (
            coll, kind, nranks, nranks, fmt_bytes(lo) if lo else "0", "*" if mx is None else fmt_bytes(mx), algo,
            dtype or "*"))
    return rows


def rule_fields(line):
    """A rule's 7 fields, its datatype column (None: every datatype) and its hosts= condition (None:
    any number of hosts), or None for other lines."""
    f = line.split("#")[0].split()
    hosts = [x for x in f[7:] if x.startswith("hosts=")]
    rest = [x for x in f[7:] if not x.startswith("hosts=")]
    if len(f) < 7 or len(rest) > 1 or len(hosts) > 1:
        return None
    return f[:7] + [rest[0] if rest and rest[0] != "*" else None, hosts[0] if hosts else None]


def note_prefix(coll, kind, nranks, dtype):
    return "# mscclpp-tune: %s %s %d ranks%s," % (coll, kind, nranks, " " + dtype if dtype else "")


def update_table(text, coll, kind, nranks, rows, note, dtype=None):
    """The table text with every rule of (coll, kind, exactly nranks, dtype, any hosts) replaced by
    rows, placed before the first remaining rule of (coll, kind) so that they match first; rules for
    every datatype (dtype None) go after those for single datatypes, which they would otherwise hide.
    Rules with a hosts= condition other than hosts=1 (several hosts) are never replaced."""
    kept = []
    for line in text.splitlines():
        f = rule_fields(line)
        if f and f[0] == coll and f[1] == kind and f[2] == f[3] == str(nranks) and f[7] == dtype and f[8] in (None, "hosts=1"):
            continue
        if line.startswith(note_prefix(coll, kind, nranks, dtype)):
            continue
        kept.append(line)
    at = len(kept)
    for i, line in enumerate(kept):
        f = rule_fields(line)
        if f and f[0] == coll and f[1] == kind and (dtype is not None or f[7] is None):
            at = i
            break
    while at > 0 and kept[at - 1].startswith("# mscclpp-tune:"):  # ahead of that rule's own note too
        at -= 1
    return "\n".join(kept[:at] + [note] + rows + kept[at:]) + "\n"


def algorithms(bindir, coll, kind, skip=None):
    """[(name, captured_only)] of the built-in algorithms of coll for the rank kind. The hierarchical
    ones (*_hier) are left out: they serve ranks on several hosts (the table's hosts= rules), and the
    runs here are on one host. skip: a compiled regular expression; names it matches (re.search)
    are left out too."""
    out = subprocess.run([os.path.join(bindir, "mscclpp-info"), "--algorithms"], check=True,
                         capture_output=True, text=True).stdout
    return pick_algorithms(out, coll, kind, skip)


def pick_algorithms(listing, coll, kind, skip=None):
    """The (name, captured_only) rows of `mscclpp-info --algorithms` output for coll and kind,
    without the *_hier ones and those skip matches."""
    return [(f[0], len(f) == 4 and f[3] == "captured-only") for f in (l.split() for l in listing.splitlines())
            if len(f) in (3, 4) and f[1] == coll and f[2] == kind and not f[0].endswith("_hier")
            and not (skip and skip.search(f[0]))]


class Failures:
    """Runs that failed: counted, the first one's last line kept, all output appended to a log."""

    def __init__(self, path):
        self.path, self.count, self.first = path, 0, None

    def add(self, what, output):
        self.count += 1
        lines = [l for l in output.splitlines() if l.strip()]
        own = [l for l in lines if l.startswith("mscclpp-perf:")]  # the rank's words, not the launcher's
        if self.first is None:
            self.first = "%s: %s" % (what, (own or lines or ["no output"])[0 if own else -1])
        with open(self.path, "a") as f:
            f.write("== %s\n%s\n" % (what, output))


def parse_size(text):
    """Bytes of a size as -b and -e take it (SIZE_RE): 64K, 1M, 1GiB, 8."""
    m = re.match(r"^([0-9]+)([kmgt]?)", text.lower())
    return int(m.group(1)) << (10 * " kmgt".index(m.group(2) or " "))


def size_grid(b, e, f):
    """The sizes of -b, -e and -f: b, b*f, ... up to e."""
    out = []
    while b <= e and b > 0:
        out.append(b)
        b *= f
    return out


def run_sizes(grid):
    """mscclpp-perf's -s list for the sizes of grid and how many of its first rows are warm-up: the
    smallest size WARM_SIZES times ahead of the grid, since a run's first calls come after the
    launcher's idle second at lower clocks (4x H200: 11-35 us eager at 16 B against 6-12 us a few
    sizes later). None when the list would exceed mscclpp-perf's 64 sizes (then no warm-up)."""
    if not grid or len(grid) + WARM_SIZES > PERF_MAX_SIZES:
        return None, 0
    return ",".join(str(x) for x in [grid[0]] * WARM_SIZES + grid), WARM_SIZES


def measure(args, coll, algo, failures, graphs=None):
    """{bytes: out-of-place us} of one forced algorithm at the sizes from -b (empty when the run
    failed, which failures records); GPU ranks: graphs CUDA-graph replays per size (0: eager calls;
    default --graphs). The run starts with warm-up calls of the smallest size (run_sizes), not kept."""
    graphs = args.graphs if graphs is None else graphs
    sizes, warm = run_sizes(size_grid(parse_size(args.b), parse_size(args.e), args.f))
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "perf.json")
        cmd = [os.path.join(args.bin, "mscclpp-run"), "-n", str(args.nranks), os.path.join(args.bin, "mscclpp-perf"),
               coll, "--" + args.kind] + (["-s", sizes] if sizes else ["-b", args.b, "-e", args.e, "-f", str(args.f)]) + [
               "-n", str(args.iters), "-w", str(args.warmup), "-c", "0", "-d", args.dtype or "float", "--json", js]
        if args.kind == "gpu":
            cmd += ["-G", str(graphs)]
        env = dict(os.environ, MSCCLPP_ALGO=algo)
        what = "%s with %s%s" % (coll, algo, " (eager)" if args.kind == "gpu" and graphs == 0 else "")
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired as e:
            failures.add(what, "timed out after %d s\n%s" % (args.timeout, e.stderr or ""))
            return {}
        if r.returncode != 0 or not os.path.exists(js):
            failures.add(what, "exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
            return {}
        with open(js) as f:
            doc = json.load(f)
    return kept_times(doc["rows"], warm)


def kept_times(rows, warm):
    """{bytes: out-of-place us} of mscclpp-perf's json rows (ours, in run order) after the first
    warm, which are warm-up."""
    ours = [row for row in rows if row.get("impl", "mscclpp") == "mscclpp"]
    return {row["bytes"]: row["out_of_place"]["time_us"] for row in ours[warm:]}


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: "mscclpp-tune: <what was wrong> (... --help ...)", exit 2."""

    def error(self, message):
        sys.stderr.write("%s: %s (%s --help lists the options)\n" % (self.prog, message, self.prog))
        sys.exit(2)


def parse_args(argv=None):
    """The command line, checked: a bad collective, datatype, size or count exits 2 naming it."""
    ap = Parser(prog="mscclpp-tune", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("-n", "--nranks", type=int, required=True, help="ranks to tune for (started with mscclpp-run)")
    ap.add_argument("--kind", choices=["gpu", "cpu"], default="gpu", help="rank kind (default gpu)")
    ap.add_argument("--collectives", default="allreduce,allgather,reducescatter,broadcast,reduce,alltoall",
                    help="comma list of collectives to tune, of: " + ", ".join(COLLECTIVES) + " (default: all but sendrecv)")
    ap.add_argument("-b", default="8", help="smallest size (K, M, G taken; default 8)")
    ap.add_argument("-e", default="256M", help="largest size (default 256M)")
    ap.add_argument("-f", type=int, default=4, help="size factor from one size to the next (default 4)")
    ap.add_argument("--iters", type=int, default=20, help="timed calls per size (default 20)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls before them (default 5)")
    ap.add_argument("--graphs", type=int, default=10, help="GPU ranks: CUDA graph replays per size (default 10)")
    ap.add_argument("--dtype", help="tune for this datatype alone (mscclpp-perf's name, e.g. half)")
    ap.add_argument("--no-captured", action="store_true", help="leave the captured-only algorithms out")
    ap.add_argument("--no-eager", action="store_true",
                    help="GPU ranks: rules for calls outside graphs from the graph runs (no eager runs)")
    ap.add_argument("--tolerance", type=float, default=0.0, metavar="PERCENT",
                    help="a size stays with the previous size's winner when that is within this many percent "
                         "of the fastest: fewer rules on a noisy machine, at up to that much time (default 0: "
                         "the fastest always wins)")
    ap.add_argument("--skip", metavar="REGEX",
                    help="leave out the algorithms whose name this matches (e.g. '_host$': slow on one host)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds one mscclpp-perf run may take (default 300)")
    ap.add_argument("--bin", default=os.path.dirname(os.path.abspath(__file__)),
                    help="directory of mscclpp-run, mscclpp-perf and mscclpp-info (default: this script's)")
    ap.add_argument("--update", metavar="TABLE", help="write the rules into this algo.tsv")
    ap.add_argument("--log", help="file for the output of failed runs (default: a new file in the temp directory)")
    args = ap.parse_args(argv)
    colls = [c for c in args.collectives.split(",") if c]
    bad = [c for c in colls if c not in COLLECTIVES]
    if bad or not colls:
        ap.error("unknown collective %s in --collectives (valid: %s)" % (", ".join(repr(c) for c in bad) or "(none)",
                                                                          ", ".join(COLLECTIVES)))
    args.collective_list = colls
    try:
        args.skip_re = re.compile(args.skip) if args.skip else None
    except re.error as e:
        ap.error("--skip %r is not a regular expression (%s)" % (args.skip, e))
    if args.dtype is not None and args.dtype not in DTYPES:
        ap.error("unknown datatype %r in --dtype (valid: %s)" % (args.dtype, ", ".join(DTYPES)))
    for opt in ("b", "e"):
        if not SIZE_RE.match(getattr(args, opt)):
            ap.error("-%s %r is not a size (a number of bytes, optionally with K, M, G)" % (opt, getattr(args, opt)))
    if not 0.0 <= args.tolerance <= 100.0:
        ap.error("--tolerance must be between 0 and 100 (percent), got %g" % args.tolerance)
    for opt, low in (("nranks", 1), ("f", 2), ("iters", 1), ("warmup", 0), ("graphs", 0), ("timeout", 1)):
        if getattr(args, opt) < low:
            ap.error("--%s must be at least %d, got %d" % (opt.replace("_", "-"), low, getattr(args, opt)))
    if args.update and not os.path.isfile(args.update):
        ap.error("--update %s: no such table" % args.update)
    return args


def main(argv=None):
    args = parse_args(argv)
    text = open(args.update).read() if args.update else None
    stamp = "%s on %s" % (datetime.date.today().isoformat(), socket.gethostname())
    log = args.log or tempfile.NamedTemporaryFile(prefix="mscclpp-tune-", suffix=".log", delete=False).name
    failures = Failures(log)
    runs = 0
    for coll in args.collective_list:
        algos = [(a, c) for a, c in algorithms(args.bin, coll, args.kind, args.skip_re) if not (c and args.no_captured)]
        captured_only = {a for a, c in algos if c}
        runs += len(algos)
        times = {a: measure(args, coll, a, failures) for a, _ in algos}
        times = {a: t for a, t in times.items() if t}
        others = {a: t for a, t in times.items() if a not in captured_only}
        eager_times = None
        if args.kind == "gpu" and not args.no_eager and args.graphs > 0:
            runs += len(others)
            eager_times = {a: measure(args, coll, a, failures, 0) for a in others}
            eager_times = {a: t for a, t in eager_times.items() if t}
        if not (others if eager_times is None else eager_times):
            sys.stderr.write("mscclpp-tune: no algorithm of %s ran on %s ranks\n" % (coll, args.kind))
            continue
        for label, tt in (("", times), (" eager", eager_times or {})):
            for a, t in tt.items():
                print("# %s %s%s: %s" % (coll, a, label, " ".join("%s=%.1f" % (fmt_bytes(b), us) for b, us in sorted(t.items()))))
        rule_list = make_rules(times, captured_only, eager_times, args.tolerance / 100.0)
        rows = tsv_rows(coll, args.kind, args.nranks, rule_list, args.dtype)
        print("\n".join(rows))
        if text is not None:
            note = "%s measured %s (out-of-place us, fastest wins%s)" % (
                note_prefix(coll, args.kind, args.nranks, args.dtype), stamp,
                "; captured-only rules from graph runs, the others from eager runs" if eager_times is not None else "")
            text = update_table(text, coll, args.kind, args.nranks, rows, note, args.dtype)
    if args.update:
        with open(args.update, "w") as f:
            f.write(text)
    if failures.count:
        sys.stderr.write("mscclpp-tune: %d of %d runs failed; the first: %s (the output of every failed run is in %s)\n"
                         % (failures.count, runs, failures.first, log))
        return 1
    if not args.log:
        os.unlink(log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
