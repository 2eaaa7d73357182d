#!/usr/bin/env python3
"""mscclpp-tune: re-makes the selection rules of tuning/algo.tsv from measurements on this machine.

For each collective it runs mscclpp-perf once per built-in algorithm of the rank kind, forced with
MSCCLPP_ALGO (out-of-place times, CUDA graphs on GPU ranks), picks the fastest algorithm at every
size, merges neighbouring sizes with the same winner into rules, and prints them as algo.tsv rows
for exactly this number of ranks (or writes them into the table with --update, ahead of the rules
they replace, with a comment saying where and when they were measured). With --dtype the runs use
that datatype (float otherwise) and the rules serve it alone (algo.tsv's datatype column): they go
ahead of the rules for every datatype, which a later run without --dtype keeps behind them.
On GPU ranks the captured-only algorithms (zero copy, copy engine) are timed too (every run is
CUDA-graph timed, i.e. captured): where one of them is the fastest of all, a rule with both bounds
names it ahead of the others; the selection skips such rules for calls outside capture, which
then take the fastest of the other algorithms (--no-captured leaves them out).

  mscclpp-tune.py -n 4 [--kind gpu] [--collectives allreduce,allgather] [-b 8 -e 256M -f 4]
                  [--dtype half] [--iters 20 --warmup 5 --graphs 10] [--bin DIR] [--update tuning/algo.tsv]
"""
import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile

UNITS = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]


def fmt_bytes(n):
    """Bytes as algo.tsv writes them: 64K, 2M, 1G when exact, else plain."""
    for size, suffix in UNITS:
        if n >= size and n % size == 0:
            return "%d%s" % (n // size, suffix)
    return str(n)


def winners(times):
    """times: {algorithm: {bytes: us}}. Returns [(bytes, algorithm)] for every size measured by
    at least one algorithm, the fastest first-listed on ties; sizes no algorithm measured are left out."""
    sizes = sorted({b for per in times.values() for b in per})
    out = []
    for b in sizes:
        best = None
        for algo, per in times.items():
            if b in per and (best is None or per[b] < times[best][b]):
                best = algo
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


def tsv_rows(coll, kind, nranks, rule_list, dtype=None):
    """Rows of rules [(max_bytes or None, algorithm)] (min 0) or [(min, max or None, algorithm)]."""
    rows = []
    for r in rule_list:
        lo, mx, algo = r if len(r) == 3 else (0, r[0], r[1])
        rows.append(("%-14s %-5s %-9d %-10d %-10s %-10s %s" % (coll, kind, nranks, nranks, fmt_bytes(lo) if lo else "0",
                     "*" if mx is None else fmt_bytes(mx), algo)) + (" %s" % dtype if dtype else ""))
    return rows


def rule_fields(line):
    """A rule's fields with its datatype column (None: every datatype), or None for other lines."""
    f = line.split("#")[0].split()
    if len(f) not in (7, 8):
        return None
    return f[:7] + [f[7] if len(f) == 8 and f[7] != "*" else None]


def note_prefix(coll, kind, nranks, dtype):
    return "# mscclpp-tune: %s %s %d ranks%s," % (coll, kind, nranks, " " + dtype if dtype else "")


def update_table(text, coll, kind, nranks, rows, note, dtype=None):
    """The table text with every rule of (coll, kind, exactly nranks, dtype) replaced by rows, placed
    before the first remaining rule of (coll, kind) so that they match first; rules for every datatype
    (dtype None) go after those for single datatypes, which they would otherwise hide."""
    kept = []
    for line in text.splitlines():
        f = rule_fields(line)
        if f and f[0] == coll and f[1] == kind and f[2] == f[3] == str(nranks) and f[7] == dtype:
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


def algorithms(bindir, coll, kind):
    """[(name, captured_only)] of the built-in algorithms of coll for the rank kind."""
    out = subprocess.run([os.path.join(bindir, "mscclpp-info"), "--algorithms"], check=True,
                         capture_output=True, text=True).stdout
    return [(f[0], len(f) == 4 and f[3] == "captured-only") for f in (l.split() for l in out.splitlines())
            if len(f) in (3, 4) and f[1] == coll and f[2] == kind]


def measure(args, coll, algo):
    """{bytes: out-of-place us} of one forced algorithm (empty when the run failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "perf.json")
        cmd = [os.path.join(args.bin, "mscclpp-run"), "-n", str(args.nranks), os.path.join(args.bin, "mscclpp-perf"),
               coll, "--" + args.kind, "-b", args.b, "-e", args.e, "-f", str(args.f), "-n", str(args.iters),
               "-w", str(args.warmup), "-c", "0", "-d", args.dtype or "float", "--json", js]
        if args.kind == "gpu":
            cmd += ["-G", str(args.graphs)]
        env = dict(os.environ, MSCCLPP_ALGO=algo)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        if r.returncode != 0 or not os.path.exists(js):
            sys.stderr.write("mscclpp-tune: %s with %s failed (exit %d):\n%s\n" % (coll, algo, r.returncode, r.stderr[-2000:]))
            return {}
        with open(js) as f:
            doc = json.load(f)
    return {row["bytes"]: row["out_of_place"]["time_us"] for row in doc["rows"] if row.get("impl", "mscclpp") == "mscclpp"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--nranks", type=int, required=True)
    ap.add_argument("--kind", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--collectives", default="allreduce,allgather,reducescatter,broadcast,reduce,alltoall")
    ap.add_argument("-b", default="8")
    ap.add_argument("-e", default="256M")
    ap.add_argument("-f", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--graphs", type=int, default=10)
    ap.add_argument("--dtype", help="tune for this datatype alone (mscclpp-perf's name, e.g. half)")
    ap.add_argument("--no-captured", action="store_true", help="leave the captured-only algorithms out")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--bin", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--update", metavar="TABLE")
    args = ap.parse_args()
    text = open(args.update).read() if args.update else None
    stamp = "%s on %s" % (datetime.date.today().isoformat(), socket.gethostname())
    for coll in args.collectives.split(","):
        algos = [(a, c) for a, c in algorithms(args.bin, coll, args.kind) if not (c and args.no_captured)]
        captured_only = {a for a, c in algos if c}
        times = {a: measure(args, coll, a) for a, _ in algos}
        times = {a: t for a, t in times.items() if t}
        eager = {a: t for a, t in times.items() if a not in captured_only}
        if not eager:
            sys.stderr.write("mscclpp-tune: no algorithm of %s ran on %s ranks\n" % (coll, args.kind))
            continue
        for a, t in times.items():
            print("# %s %s: %s" % (coll, a, " ".join("%s=%.1f" % (fmt_bytes(b), us) for b, us in sorted(t.items()))))
        rule_list = captured_rules(winners(times), captured_only) + rules(winners(eager))
        rows = tsv_rows(coll, args.kind, args.nranks, rule_list, args.dtype)
        print("\n".join(rows))
        if text is not None:
            note = "%s measured %s (out-of-place us, fastest wins)" % (
                note_prefix(coll, args.kind, args.nranks, args.dtype), stamp)
            text = update_table(text, coll, args.kind, args.nranks, rows, note, args.dtype)
    if args.update:
        with open(args.update, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
