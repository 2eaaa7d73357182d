"""mscclpp.perfplot: series() splits mscclpp-perf --json rows by implementation (ours, NCCL, NCCL-symm) and
datatype/operator (no matplotlib needed); plot_results and the command line write a PNG of sane
size from a checked-in sample of a real 2-CPU-rank run (data/perf_allreduce_cpu2.json) and, when
mscclpp-perf is built, from a fresh run of it; bad input is one clear error."""
import copy
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
ROOT = PYTHON_DIR.parent
SAMPLE = Path(__file__).resolve().parent / "data" / "perf_allreduce_cpu2.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _load_perfplot():
    """The source tree's mscclpp/perfplot.py (one pure-Python file), whatever package is installed."""
    spec = importlib.util.spec_from_file_location("mscclpp_perfplot_src", PYTHON_DIR / "mscclpp" / "perfplot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


perfplot = _load_perfplot()
needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib is not installed")


def tool_dir():
    for candidate in (os.environ.get("MSCCLPP_TOOL_DIR"), ROOT / "build-cpu/bin", ROOT / "build/bin"):
        if candidate and (Path(candidate) / "mscclpp-perf").is_file() and (Path(candidate) / "mscclpp-run").is_file():
            return Path(candidate)
    return None


def with_nccl_rows(doc, impl="nccl"):
    """The document with an NCCL row beside each of ours (half our bandwidth), as --nccl runs give
    (impl "nccl-symm": the rows --nccl-symm adds)."""
    out = copy.deepcopy(doc)
    for row in doc["rows"]:
        n = copy.deepcopy(row)
        n["impl"] = impl
        for key in ("out_of_place", "in_place"):
            if n[key]:
                n[key]["busbw_gbs"] /= 2
                n[key]["time_us"] *= 2
        out["rows"].append(n)
    return out


def check_png(path):
    data = Path(path).read_bytes()
    assert data[:8] == PNG_MAGIC, "not a PNG"
    assert 5_000 < len(data) < 5_000_000, "implausible PNG size %d" % len(data)


def test_series_of_sample():
    doc = perfplot.load_results(SAMPLE)
    s = perfplot.series(doc)
    assert len(s) == 1
    label, impl, sizes, busbw, times = s[0]
    assert impl == "mscclpp" and sizes == sorted(sizes) and len(sizes) == len(doc["rows"])
    assert all(t > 0 for t in times) and all(b >= 0 for b in busbw)
    assert "allreduce" in label and "2 cpu ranks" in label


def test_series_split_by_impl_and_dtype():
    doc = with_nccl_rows(perfplot.load_results(SAMPLE))
    impls = sorted(x[1] for x in perfplot.series(doc))
    assert impls == ["mscclpp", "nccl"]
    both = with_nccl_rows(doc, "nccl-symm")  # --nccl-symm: a third line
    assert sorted(x[1] for x in perfplot.series(both)) == ["mscclpp", "nccl", "nccl-symm"]
    doc["rows"].append(dict(doc["rows"][0], datatype="half"))
    labels = [x[0] for x in perfplot.series(doc)]
    assert any("(half sum)" in l for l in labels) and any("(float sum)" in l for l in labels)
    doc["rows"][0] = dict(doc["rows"][0], in_place=None)
    assert sum(len(x[2]) for x in perfplot.series(doc, "in")) == len(doc["rows"]) - 1


def test_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        perfplot.load_results(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="mscclpp-perf"):
        perfplot.load_results(other)
    assert perfplot.main([str(other), "-o", str(tmp_path / "x.png")]) == 1


@needs_matplotlib
def test_png_from_sample_and_nccl(tmp_path):
    both = tmp_path / "both.json"
    both.write_text(json.dumps(with_nccl_rows(perfplot.load_results(SAMPLE))))
    out = tmp_path / "perf.png"
    assert perfplot.main([str(SAMPLE), str(both), "-o", str(out)]) == 0
    check_png(out)


@needs_matplotlib
def test_png_from_a_real_run(tmp_path):
    bindir = tool_dir()
    if bindir is None:
        pytest.skip("mscclpp-perf is not built")
    js = tmp_path / "run.json"
    r = subprocess.run([str(bindir / "mscclpp-run"), "-n", "2", str(bindir / "mscclpp-perf"), "allgather", "--cpu",
                        "-b", "1K", "-e", "64K", "-f", "4", "-n", "2", "-w", "1", "--json", str(js)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "run.png"
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                        "import importlib.util as u; s = u.spec_from_file_location('p', sys.argv[2]); "
                        "m = u.module_from_spec(s); s.loader.exec_module(m); sys.exit(m.main(sys.argv[3:]))",
                        str(PYTHON_DIR), str(PYTHON_DIR / "mscclpp" / "perfplot.py"), str(js), "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    check_png(out)
