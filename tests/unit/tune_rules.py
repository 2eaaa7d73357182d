#!/usr/bin/env python3
"""tools/mscclpp_tune.py: the rule making (winners, merged runs, table update) on made-up times,
then one real run on 2 CPU ranks whose rules go into a copy of tuning/algo.tsv that the library
must then load (mscclpp-perf with MSCCLPP_ALGO_TABLE pointing at it).
  tune_rules.py BINDIR SOURCEDIR"""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

bindir, srcdir = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("tune", os.path.join(srcdir, "tools", "mscclpp_tune.py"))
tune = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tune)


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


times = {"a": {8: 1.0, 1024: 2.0, 65536: 9.0, 1 << 20: 50.0},
         "b": {8: 3.0, 1024: 2.5, 65536: 5.0, 1 << 20: 20.0},
         "c": {8: 2.0, 1024: 1.5}}
win = tune.winners(times)
check(win == [(8, "a"), (1024, "c"), (65536, "b"), (1 << 20, "b")], "winners: %r" % win)
r = tune.rules(win)
check(r == [(8, "a"), (1024, "c"), (None, "b")], "rules: %r" % r)
check(tune.fmt_bytes(65536) == "64K" and tune.fmt_bytes(3 << 20) == "3M" and tune.fmt_bytes(1000) == "1000", "fmt_bytes")
# A tolerance keeps the previous size's winner where it is that close to the fastest (noise between
# near-equal algorithms, e.g. an LL algorithm past its inbox handing calls to its bulk sibling).
near = {"ll": {8: 1.0, 1024: 9.0, 1 << 20: 100.0, 1 << 30: 99.5}, "bulk": {8: 5.0, 1024: 5.0, 1 << 20: 99.0, 1 << 30: 100.0}}
check(tune.rules(tune.winners(near)) == [(8, "ll"), (1 << 20, "bulk"), (None, "ll")], "no tolerance: split by noise")
check(tune.rules(tune.winners(near, 0.02)) == [(8, "ll"), (None, "bulk")], "2%% tolerance: %r" % tune.rules(tune.winners(near, 0.02)))
check(tune.winners(times, 0.02) == win, "a tolerance leaves clear winners alone")
# Captured-only winners: rules with both bounds, ahead of the rules of the other algorithms.
ctimes = dict(times, z={8: 9.0, 1024: 1.0, 65536: 1.0, 1 << 20: 30.0})
cr = tune.captured_rules(tune.winners(ctimes), {"z"})
check(cr == [(9, 65536, "z")], "captured rules: %r" % cr)
crow = tune.tsv_rows("allreduce", "gpu", 4, cr + r)
check(crow[0].split() == ["allreduce", "gpu", "4", "4", "9", "64K", "z", "*", "hosts=1"]
      and crow[1].split()[4:] == ["0", "8", "a", "*", "hosts=1"],
      "captured rows first, bounded: %r" % crow)
check(tune.captured_rules(tune.winners({"z": {8: 1.0, 64: 1.0}, "a": {8: 2.0, 64: 2.0}}), {"z"}) == [(0, None, "z")],
      "a captured-only winner of every size: one rule for all")
# Eager times decide the rules for every call; the graph times only place the captured-only ones.
gt = {"z": {8: 1.0, 64: 9.0, 1024: 9.0}, "a": {8: 2.0, 64: 2.0, 1024: 5.0}, "b": {8: 3.0, 64: 3.0, 1024: 4.0}}
et = {"a": {8: 4.0, 64: 6.0, 1024: 9.0}, "b": {8: 5.0, 64: 5.0, 1024: 8.0}}
check(tune.make_rules(gt, {"z"}, et) == [(0, 8, "z"), (8, "a"), (None, "b")], "eager rules: %r" % tune.make_rules(gt, {"z"}, et))
check(tune.make_rules(gt, {"z"}) == [(0, 8, "z"), (64, "a"), (None, "b")], "graph-only rules: %r" % tune.make_rules(gt, {"z"}))
rows = tune.tsv_rows("allreduce", "gpu", 4, r)
check(len(rows) == 3 and rows[0].split() == ["allreduce", "gpu", "4", "4", "0", "8", "a", "*", "hosts=1"], "rows: %r" % rows)
table = "# head\nallreduce gpu 4 4 0 1K old\nallreduce gpu 1 * 0 * keep\nallgather gpu 1 * 0 * other\n"
new = tune.update_table(table, "allreduce", "gpu", 4, rows, "# mscclpp-tune: allreduce gpu 4 ranks, test")
lines = new.splitlines()
check("old" not in new and "keep" in new, "update drops the replaced rule only")
check(lines.index(rows[0]) < lines.index("allreduce gpu 1 * 0 * keep"), "new rules come first")
again = tune.update_table(new, "allreduce", "gpu", 4, rows, "# mscclpp-tune: allreduce gpu 4 ranks, test")
check(again == new, "updating twice gives the same table")
# Rules for one datatype: their own column, ahead of the rules for every datatype, and a later
# update of either kind keeps that order and replaces only its own.
hrows = tune.tsv_rows("allreduce", "gpu", 4, [(None, "h")], "half")
check(hrows[0].split() == ["allreduce", "gpu", "4", "4", "0", "*", "h", "half", "hosts=1"], "dtype rows: %r" % hrows)
withh = tune.update_table(new, "allreduce", "gpu", 4, hrows, "# mscclpp-tune: allreduce gpu 4 ranks half, test", "half")
hl = withh.splitlines()
check(hl.index(hrows[0]) < hl.index(rows[0]) and rows[0] in hl, "datatype rules first, the others kept")
regen = tune.update_table(withh, "allreduce", "gpu", 4, rows, "# mscclpp-tune: allreduce gpu 4 ranks, test")
rl = regen.splitlines()
check(rl.index(hrows[0]) < rl.index(rows[0]) and regen.count(rows[0]) == 1, "re-tuned generic rules stay behind")
check(tune.update_table(regen, "allreduce", "gpu", 4, hrows, "# mscclpp-tune: allreduce gpu 4 ranks half, test",
                        "half") == regen, "updating the datatype rules twice gives the same table")

# A re-tune's rows are for one host (hosts=1): the rules for several hosts (hosts=2..*) after them
# stay in force, and are never replaced by a one-host update; rows of an older tune without hosts=
# are replaced.
htable = "allreduce gpu 4 4 0 * old\nallreduce gpu 1 * 0 * hier hosts=2..*\nallreduce gpu 1 * 0 * keep\n"
hnew = tune.update_table(htable, "allreduce", "gpu", 4, rows, "# mscclpp-tune: allreduce gpu 4 ranks, test")
check("old" not in hnew and "hier hosts=2..*" in hnew and all(r in hnew for r in rows), "hosts= update: %r" % hnew)
check(tune.rule_fields("allreduce cpu 1 * 0 * a half hosts=2") == ["allreduce", "cpu", "1", "*", "0", "*", "a", "half",
                                                                   "hosts=2"], "hosts= parsed beside the datatype")

# --skip: the algorithms it matches are not timed; the hierarchical ones never are.
listing = "gpu_allreduce_ll1 allreduce gpu\ngpu_allreduce_host allreduce gpu\ngpu_allreduce_hier allreduce gpu\n" \
          "gpu_allreduce_zc allreduce gpu captured-only\ngpu_allgather_ll allgather gpu\n"
check(tune.pick_algorithms(listing, "allreduce", "gpu") ==
      [("gpu_allreduce_ll1", False), ("gpu_allreduce_host", False), ("gpu_allreduce_zc", True)], "listing parsed")
check(tune.pick_algorithms(listing, "allreduce", "gpu", re.compile("_host$")) ==
      [("gpu_allreduce_ll1", False), ("gpu_allreduce_zc", True)], "--skip leaves the matches out")


def check_rejected(option, value):
    """mscclpp-tune with a bad value of option exits 2 naming the option."""
    bad = subprocess.run([sys.executable, os.path.join(srcdir, "tools", "mscclpp_tune.py"), "-n", "2", option, value],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode == 2 and option in bad.stderr, "a bad %s exits 2 naming it: %r" % (option, bad.stderr))


check_rejected("--skip", "(")
check_rejected("--tolerance", "-1")

# Each run first runs its smallest size twice more (warm-up), and those rows are dropped.
check(tune.parse_size("1K") == 1024 and tune.parse_size("64") == 64 and tune.parse_size("1GiB") == 1 << 30, "parse_size")
check(tune.size_grid(8, 256, 4) == [8, 32, 128] and tune.size_grid(1024, 1024, 2) == [1024], "size_grid")
check(tune.run_sizes([8, 32, 128]) == ("8,8,8,32,128", 2), "run_sizes: %r" % (tune.run_sizes([8, 32, 128]),))
check(tune.run_sizes(list(range(1, 64))) == (None, 0), "no warm-up past mscclpp-perf's 64 sizes")
jrows = [{"bytes": b, "out_of_place": {"time_us": t}} for b, t in ((8, 35.0), (8, 20.0), (8, 6.0), (32, 7.0))]
jrows.insert(1, {"bytes": 8, "impl": "nccl", "out_of_place": {"time_us": 1.0}})
check(tune.kept_times(jrows, 2) == {8: 6.0, 32: 7.0}, "the warm-up rows dropped: %r" % tune.kept_times(jrows, 2))

# One real run on CPU ranks.
with tempfile.TemporaryDirectory() as tmp:
    tab = os.path.join(tmp, "algo.tsv")
    with open(os.path.join(srcdir, "tuning", "algo.tsv")) as f, open(tab, "w") as g:
        g.write(f.read())
    r = subprocess.run([sys.executable, os.path.join(srcdir, "tools", "mscclpp_tune.py"), "-n", "2", "--kind", "cpu",
                        "--collectives", "allreduce", "-b", "1K", "-e", "64K", "-f", "8", "--iters", "2",
                        "--warmup", "1", "--dtype", "half", "--bin", bindir, "--update", tab], capture_output=True,
                       text=True, timeout=300)
    check(r.returncode == 0, "mscclpp-tune failed: " + r.stderr)
    new_rows = [l for l in r.stdout.splitlines() if l.startswith("allreduce")]
    check(len(new_rows) >= 1 and new_rows[-1].split()[5] == "*", "tune printed rules: %r" % r.stdout)
    timed = [l for l in r.stdout.splitlines() if l.startswith("# allreduce ")]
    check(timed and all([x.split("=")[0] for x in l.split(": ", 1)[1].split()] == ["1K", "8K", "64K"] for l in timed),
          "one time per size, the warm-up rows dropped: %r" % timed)
    check(all(l.split()[6] in ("cpu_allreduce_rsag", "cpu_allreduce_allpairs") and l.split()[7] == "half"
              for l in new_rows), "rules name CPU algorithms, for half")
    with open(tab) as f:
        check(new_rows[0] in f.read(), "the table holds the new rules")
    p = subprocess.run([os.path.join(bindir, "mscclpp-run"), "-n", "2", os.path.join(bindir, "mscclpp-perf"), "allreduce",
                        "--cpu", "-s", "4K", "-n", "1", "-w", "0", "-d", "half"], env=dict(os.environ, MSCCLPP_ALGO_TABLE=tab),
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "the library loads the updated table: " + p.stderr)
print("tune_rules: ok")
