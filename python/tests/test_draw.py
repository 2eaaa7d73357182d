"""mscclpp.draw: plan_edges pairs each signal with the wait the executor pairs it with (no
matplotlib needed), and draw_plan draws golden plans as valid SVG with every rank, every op name
and one arrow per signal -> wait pair (skipped without matplotlib)."""
import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
ROOT = PYTHON_DIR.parent
GOLDEN = PYTHON_DIR / "tests" / "golden"


def _load_draw():
    """The installed mscclpp.draw, else the source tree's (it is one pure-Python file)."""
    try:
        import mscclpp.draw as draw
        return draw
    except ImportError:
        spec = importlib.util.spec_from_file_location("mscclpp_draw_src", PYTHON_DIR / "mscclpp" / "draw.py")
        draw = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(draw)
        return draw


draw = _load_draw()
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None
needs_mpl = pytest.mark.skipif(not HAVE_MPL, reason="matplotlib is not installed (pip install mscclpp[draw])")
DRAWN = ["allreduce_two_shot_4", "allreduce_packets_4", "allgather_port_2", "allreduce_pipelined_2",
         "allreduce_ring_4", "allreduce_switch_4", "reducescatter_4"]


def golden(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.json").read_text())


def wait_ends(plan: dict) -> int:
    """Channel ends waited on (each pairs with exactly one signal in a balanced plan)."""
    return sum(len(op.get("channel_ids", [])) for g in plan["gpus"] for tb in g["threadblocks"]
               for op, _ in draw.flat_ops(tb) if op["name"] in ("wait", "rlxwait"))


def op_names(plan: dict) -> set:
    return {op["name"] for g in plan["gpus"] for tb in g["threadblocks"] for op, _ in draw.flat_ops(tb)}


def two_rank_plan() -> dict:
    """Two channels between ranks 0 and 1; the blocks use them crosswise, so pairing must go
    through the block tables and the per-peer ordinals."""
    def tb(i, chan, first):
        sig = {"name": "signal", "channel_type": "memory", "channel_ids": [0]}
        wait = {"name": "wait", "channel_type": "memory", "channel_ids": [0]}
        return {"id": i, "channels": [{"channel_type": "memory", "channel_ids": [chan]}],
                "ops": [sig, {"name": "nop"}, wait] if first else [wait, {"name": "nop"}, sig]}
    gpus = [{"id": 0, "channels": [{"channel_type": "memory", "connected_to": [1, 1]}],
             "threadblocks": [tb(0, 0, True), tb(1, 1, True)]},
            {"id": 1, "channels": [{"channel_type": "memory", "connected_to": [0]},
                                   {"channel_type": "memory", "connected_to": [0]}],
             "threadblocks": [tb(0, 1, False), tb(1, 0, False)]}]
    return {"name": "cross", "collective": "custom", "protocol": "Simple", "gpus": gpus}


# ---- edges (no matplotlib) -----------------------------------------------------------------------

def test_pairs_follow_channel_ordinals():
    edges = sorted(draw.plan_edges(two_rank_plan()))
    assert edges == [(0, 0, 0, 1, 1, 0, "signal"), (0, 1, 0, 1, 0, 0, "signal"),
                     (1, 0, 2, 0, 1, 2, "signal"), (1, 1, 2, 0, 0, 2, "signal")]


def test_nth_signal_pairs_with_nth_wait():
    plan = two_rank_plan()
    for g in plan["gpus"]:  # every block: signal, signal, nop, wait, wait
        for tb in g["threadblocks"]:
            sig, nop, wait = sorted(tb["ops"], key=lambda o: ["signal", "nop", "wait"].index(o["name"]))
            tb["ops"] = [sig, dict(sig), nop, wait, dict(wait)]
    sig = sorted(e for e in draw.plan_edges(plan) if e[0] == 0 and e[1] == 0)
    assert [(e[2], e[4], e[5]) for e in sig] == [(0, 1, 3), (1, 1, 4)]


@pytest.mark.parametrize("name", [p.stem for p in sorted(GOLDEN.glob("*.json"))])
def test_every_wait_paired_in_golden(name):
    plan = golden(name)
    edges = draw.plan_edges(plan)
    sig = [e for e in edges if e[6] == "signal"]
    assert len(sig) == wait_ends(plan)
    for sr, sb, sk, dr, db, dk, _ in sig:
        src = draw.flat_ops(plan["gpus"][sr]["threadblocks"][sb])[sk][0]["name"]
        dst = draw.flat_ops(plan["gpus"][dr]["threadblocks"][db])[dk][0]["name"]
        assert src in draw.SIGNALS and dst in draw.WAITS and sr != dr


def test_port_plan_edges():
    edges = draw.plan_edges(GOLDEN / "allgather_port_2.json")
    assert sorted(e for e in edges if e[6] == "signal") == [
        (0, 0, 0, 1, 0, 1, "signal"), (0, 0, 3, 1, 0, 4, "signal"),
        (1, 0, 0, 0, 0, 1, "signal"), (1, 0, 3, 0, 0, 4, "signal")]
    assert sorted(e for e in edges if e[6] == "data") == [(0, 0, 3, 1, None, None, "data"),
                                                          (1, 0, 3, 0, None, None, "data")]


def test_packets_go_to_their_reader():
    edges = draw.plan_edges((GOLDEN / "allreduce_packets_2.json").read_text())
    assert sorted(edges) == [(0, 0, 0, 1, 0, 1, "data"), (1, 0, 0, 0, 0, 1, "data")]


@pytest.mark.parametrize("bad, what", [("{not json", "not JSON"), ('{"name": "x"}', "gpus"),
                                       ({"gpus": [{"id": 0}]}, "threadblocks"),
                                       ({"gpus": [{"threadblocks": [{"ops": [{}]}]}]}, "name"),
                                       ("/no/such/plan.json", "neither JSON text nor a file")])
def test_bad_plan_raises(bad, what):
    with pytest.raises(ValueError, match=what):
        draw.plan_edges(bad)
    with pytest.raises(ValueError, match=what):
        draw.draw_plan(bad, "unused.svg")


def test_unresolved_channel_raises():
    plan = two_rank_plan()
    plan["gpus"][0]["threadblocks"][0]["ops"][0]["channel_ids"] = [5]
    with pytest.raises(ValueError, match="does not resolve"):
        draw.plan_edges(plan)


def test_missing_matplotlib_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install mscclpp\[draw\]"):
        draw.draw_plan(two_rank_plan(), "unused.svg")


# ---- drawing -------------------------------------------------------------------------------------

def svg_texts_and_ids(path: Path):
    root = ET.parse(path).getroot()  # raises on invalid XML
    assert root.tag.endswith("svg")
    texts = {"".join(el.itertext()).strip() for el in root.iter() if el.tag.endswith("text")}
    ids = [el.get("id") for el in root.iter() if el.get("id")]
    return texts, ids


@needs_mpl
@pytest.mark.parametrize("name", DRAWN)
def test_draw_golden_svg(name, tmp_path):
    plan = golden(name)
    out = tmp_path / f"{name}.svg"
    drawn = draw.draw_plan(GOLDEN / f"{name}.json", out)
    assert out.is_file() and out.stat().st_size > 0
    texts, ids = svg_texts_and_ids(out)
    for r in range(len(plan["gpus"])):
        assert f"rank {r}" in texts
    assert op_names(plan) <= texts
    signal_arrows = [i for i in ids if i.startswith("edge-signal-")]
    assert len(signal_arrows) == wait_ends(plan) == sum(e[6] == "signal" for e in draw.plan_edges(plan))
    assert drawn == len([i for i in ids if i.startswith("edge-")])
    assert any(plan["name"] in t and plan["collective"] in t for t in texts)


@needs_mpl
def test_max_ops_truncates_with_note(tmp_path):
    out = tmp_path / "ring.svg"
    full = draw.draw_plan(golden("allreduce_ring_4"), out)
    few = draw.draw_plan(golden("allreduce_ring_4"), out, max_ops=6, title="ring")
    texts, _ = svg_texts_and_ids(out)
    assert 0 < few < full
    assert any(t.startswith("ring") and "first 6 of 30 ops" in t for t in texts)


@needs_mpl
@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".pdf", b"%PDF")])
def test_other_formats(suffix, magic, tmp_path):
    out = tmp_path / f"plan{suffix}"
    draw.draw_plan(golden("allreduce_packets_2"), out)
    assert out.read_bytes().startswith(magic)


def run_module(module, *args, cwd):
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@needs_mpl
def test_draw_cli(tmp_path):
    out = tmp_path / "p.svg"
    r = run_module("mscclpp.draw", GOLDEN / "allreduce_two_shot_2.json", "-o", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert out.is_file()
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x"}')
    r = run_module("mscclpp.draw", bad, "-o", out, cwd=tmp_path)
    assert r.returncode == 1 and "gpus" in r.stderr and "Traceback" not in r.stderr


@needs_mpl
def test_language_cli_draw(tmp_path):
    plan, pic = tmp_path / "p.json", tmp_path / "p.svg"
    r = run_module("mscclpp.language", "-o", plan, ROOT / "examples" / "dsl" / "allreduce_packets.py",
                   "--num_gpus", "2", "--draw", pic, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(plan.read_text())["name"] and pic.is_file()
    texts, _ = svg_texts_and_ids(pic)
    assert {"rank 0", "rank 1", "ppkt"} <= texts
