"""A picture of an execution plan: one swim lane per (rank, threadblock), ops as coloured boxes in
program order, arrows from each signal to the wait it pairs with and from each remote write to the
destination rank.

    from mscclpp.draw import draw_plan, plan_edges
    draw_plan("plan.json", "plan.svg")          # or .png / .pdf; plan: JSON text, dict or path
    python -m mscclpp.draw plan.json -o plan.svg [--max-ops N] [--title TEXT]

Only drawing needs matplotlib (`pip install mscclpp[draw]`); loading and `plan_edges` are pure
Python. Positions are program order (op k of a threadblock in column k; a pipeline's body follows
its pipeline op), not timing. Signal/wait pairing follows the executor: the i-th memory (or port)
channel from rank a to rank b pairs with the i-th channel of that type from b to a, and the n-th
signal on a channel pairs with the n-th wait on its pair (within the same pipeline context)."""
import argparse
import json
import os
import sys
from collections import defaultdict

SIGNALS = {"signal", "rlxsignal", "pws", "pwsf"}
WAITS = {"wait", "rlxwait"}

# Op family -> (legend label, face colour), and each op's family.
FAMILIES = {
    "data": ("data movement", "#8ec1ee"),
    "reduce": ("reduction", "#f7b267"),
    "sync": ("synchronisation", "#d0d0d0"),
    "packet": ("packets", "#9ed39a"),
    "switch": ("switch", "#c9a6d8"),
    "control": ("pipeline", "#f3e38a"),
    "other": ("other", "#ffffff"),
}
_FAMILY_OPS = {
    "data": "put pws pwsf get copy",
    "reduce": "re res rre rres",
    "sync": "signal wait rlxsignal rlxwait flush nop barrier sem_acquire sem_release",
    "packet": "ppkt rppkt cpkt upkt repkt respkt recpkt recspkt",
    "switch": "glre glres gstore gstorepkt",
    "control": "pipeline",
}
OP_FAMILY = {op: fam for fam, ops in _FAMILY_OPS.items() for op in ops.split()}
EDGE_STYLE = {"signal": ("signal \u2192 wait", "#c0392b", "-"), "data": ("remote write", "#1f4e9a", "--")}


# ---- loading -------------------------------------------------------------------------------------

def load_plan(plan) -> dict:
    """The plan as a dict, from JSON text, a dict or a file path; ValueError naming what is wrong."""
    if isinstance(plan, dict):
        data = plan
    else:
        text = plan if isinstance(plan, str) and plan.lstrip().startswith(("{", "[")) else None
        if text is None:
            path = os.fspath(plan)
            if not os.path.isfile(path):
                raise ValueError(f"plan: {path!r} is neither JSON text nor a file")
            with open(path, encoding="utf-8") as f:
                text = f.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"plan: not JSON ({e})") from None
    _check_shape(data)
    return data


def _check_shape(data) -> None:
    """ValueError unless data has gpus[].threadblocks[].ops[] with op names (all this module reads)."""
    if not isinstance(data, dict):
        raise ValueError("plan: the top level is not a JSON object")
    gpus = data.get("gpus")
    if not isinstance(gpus, list) or not gpus:
        raise ValueError("plan: missing 'gpus' (a non-empty array, one entry per rank)")
    for r, g in enumerate(gpus):
        if not isinstance(g, dict) or not isinstance(g.get("threadblocks"), list):
            raise ValueError(f"plan: gpus[{r}] has no 'threadblocks' array")
        for b, tb in enumerate(g["threadblocks"]):
            if not isinstance(tb, dict) or not isinstance(tb.get("ops"), list):
                raise ValueError(f"plan: gpus[{r}].threadblocks[{b}] has no 'ops' array")
            for k, (op, _) in enumerate(flat_ops(tb)):
                if not isinstance(op, dict) or not isinstance(op.get("name"), str):
                    raise ValueError(f"plan: gpus[{r}].threadblocks[{b}] op {k} has no 'name'")


def flat_ops(tb: dict) -> list:
    """(op, pipeline context) in program order; a pipeline's nested ops follow it, their context
    (unit_size, num_chunks), else None."""
    out = []
    for op in tb.get("ops", []):
        out.append((op, None))
        if isinstance(op, dict) and op.get("name") == "pipeline":
            it = op.get("iter_context") or {}
            ctx = (it.get("unit_size"), it.get("num_chunks"))
            out.extend((inner, ctx) for inner in op.get("ops", []))
    return out


# ---- edges ---------------------------------------------------------------------------------------

def _gpu_channels(gpu: dict) -> dict:
    """channel type -> [(peer, ordinal)]: the gpu's memory/port channels in plan order, the ordinal
    counting earlier channels of that type to the same peer (what pairs them across ranks)."""
    table, seen = defaultdict(list), defaultdict(int)
    for ch in gpu.get("channels", []):
        t = ch.get("channel_type")
        if t not in ("memory", "port"):
            continue
        for peer in ch.get("connected_to", []):
            table[t].append((peer, seen[t, peer]))
            seen[t, peer] += 1
    return table


def _block_table(tb: dict, key: str, ids_key: str, type_key: str) -> dict:
    """type -> the block-local index table (block channels or remote buffer refs) of that type."""
    table = defaultdict(list)
    for entry in tb.get(key, []):
        table[entry.get(type_key)].extend(entry.get(ids_key, []))
    return table


def _op_channels(op: dict, tb_chans: dict, gpu_chans: dict) -> list:
    """(peer, ordinal) of each channel the op names through its block-local channel_ids."""
    t = op.get("channel_type")
    return [gpu_chans[t][tb_chans[t][k]] for k in op.get("channel_ids", [])]


def _remote_dsts(op: dict, gpu: dict, tb_bufs: dict) -> list:
    """(owner rank, buffer type, index, size) of each remote buffer the op writes."""
    t = op.get("channel_type") if op.get("channel_type") in ("memory", "port") else "memory"
    out = []
    for ref in op.get("dst_buff", []):
        if "buffer_id" in ref:
            rb = gpu["remote_buffers"][tb_bufs[t][ref["buffer_id"]]]
            out.append((rb["rank"], rb["type"], ref.get("index", 0), ref.get("size", 1)))
    return out


def _signal_edges(plan: dict) -> list:
    """n-th signal on each channel -> n-th wait on its pair, per pipeline context."""
    ends = defaultdict(lambda: ([], []))  # (type, sender, receiver, ordinal, ctx) -> (signals, waits)
    for r, gpu in enumerate(plan["gpus"]):
        gchans = _gpu_channels(gpu)
        for b, tb in enumerate(gpu["threadblocks"]):
            tchans = _block_table(tb, "channels", "channel_ids", "channel_type")
            for k, (op, ctx) in enumerate(flat_ops(tb)):
                name = op["name"]
                if name not in SIGNALS and name not in WAITS:
                    continue
                for peer, ord_ in _op_channels(op, tchans, gchans):
                    wait = name in WAITS
                    key = (op.get("channel_type"), peer if wait else r, r if wait else peer, ord_, ctx)
                    ends[key][wait].append((r, b, k))
    edges = []
    for key in sorted(ends, key=repr):
        sigs, waits = (sorted(x) for x in ends[key])
        edges += [(*s, *w, "signal") for s, w in zip(sigs, waits)]
    return edges


def _reader(plan: dict, rank: int, btype: str, index: int, size: int, after: int):
    """(tb, op) of the first op of `rank` after column `after` reading its own buffer btype over
    [index, index + size); None when none does."""
    best = None
    for b, tb in enumerate(plan["gpus"][rank]["threadblocks"]):
        for k, (op, _) in enumerate(flat_ops(tb)):
            if k <= after or (best and k >= best[1]):
                continue
            for ref in op.get("src_buff", []):
                lo = ref.get("index", 0)
                if ref.get("type") == btype and lo < index + size and index < lo + ref.get("size", 1):
                    best = (b, k)
                    break
    return best


def _data_edges(plan: dict) -> list:
    """Each remote write (put, pws, res, ppkt, ...) -> the destination rank's first later reader of
    what it wrote, or (dst_tb, dst_op) = (None, None) when no later op there reads it."""
    edges = []
    for r, gpu in enumerate(plan["gpus"]):
        for b, tb in enumerate(gpu["threadblocks"]):
            bufs = _block_table(tb, "remote_buffer_refs", "remote_buffer_ids", "access_channel_type")
            for k, (op, _) in enumerate(flat_ops(tb)):
                for owner, btype, index, size in _remote_dsts(op, gpu, bufs):
                    dst = _reader(plan, owner, btype, index, size, k) or (None, None)
                    edges.append((r, b, k, owner, *dst, "data"))
    return edges


def plan_edges(plan) -> list:
    """Inter-rank dependencies as (src_rank, src_tb, src_op, dst_rank, dst_tb, dst_op, kind): kind
    "signal" for each signal -> wait pair (one per channel of a multi-channel op), "data" for each
    remote write -> destination rank. tb is the threadblock's position in gpus[r].threadblocks, op
    its position in flat_ops order. ValueError for a malformed plan (channel or buffer ids out of
    range included)."""
    plan = load_plan(plan)
    try:
        return _signal_edges(plan) + _data_edges(plan)
    except (IndexError, KeyError, TypeError) as e:
        raise ValueError(f"plan: a channel or remote buffer reference does not resolve ({e!r})") from None


# ---- drawing -------------------------------------------------------------------------------------

def _import_pyplot():
    """matplotlib.pyplot on a file-only backend, or ImportError saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("drawing a plan needs matplotlib: pip install mscclpp[draw] "
                          "(or pip install matplotlib)") from None
    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _layout(plan: dict, max_ops):
    """Lanes [(rank, tb, tb_id, y)] top to bottom with a gap between ranks, each lane's shown ops,
    the widest lane and the longest one before truncation."""
    lanes, ops, y, longest = [], {}, 0.0, 0
    for r, gpu in enumerate(plan["gpus"]):
        for b, tb in enumerate(gpu["threadblocks"]):
            flat = [op for op, _ in flat_ops(tb)]
            longest = max(longest, len(flat))
            ops[r, b] = flat if max_ops is None else flat[:max_ops]
            lanes.append((r, b, tb.get("id", b), y))
            y += 1.0
        y += 0.6
    width = max([len(v) for v in ops.values()] + [1])
    return lanes, ops, width, longest


def _title(plan: dict, title) -> str:
    """The given title, else name, collective, ranks, protocol and instances (when the plan says)."""
    if title:
        return title
    parts = [f"{plan.get('collective', '?')}", f"{len(plan['gpus'])} ranks", f"protocol {plan.get('protocol', '?')}"]
    inst = plan.get("instances", plan.get("num_instances"))
    tbs = max(len(g["threadblocks"]) for g in plan["gpus"])
    parts.append(f"instances {inst}" if inst is not None else f"{tbs} threadblock{'s' * (tbs != 1)}/rank")
    if plan.get("inplace"):
        parts.append("in place")
    return f"{plan.get('name') or 'plan'}: " + ", ".join(parts)


def _box_fontsize(name: str, box_pt: float) -> float:
    """A font size that fits `name` in a box box_pt points wide (2.5 to 8 pt)."""
    return max(2.5, min(8.0, box_pt / (0.68 * max(len(name), 3))))


def _draw_lanes(ax, plan, lanes, ops, cell_in):
    """Rank bands, lane guides, op boxes; returns {(rank, tb, op): (patch, x, y)}."""
    from matplotlib.patches import FancyBboxPatch
    boxes, box_w = {}, 0.86
    for r in range(len(plan["gpus"])):
        ys = [y for rr, _, _, y in lanes if rr == r]
        if not ys:
            continue
        ax.axhspan(min(ys) - 0.5, max(ys) + 0.5, color="#f4f6fa" if r % 2 == 0 else "#ffffff", zorder=0)
        ax.annotate(f"rank {r}", xy=(0, (min(ys) + max(ys)) / 2), xycoords=("axes fraction", "data"),
                    xytext=(-34, 0), textcoords="offset points", ha="right", va="center", fontsize=9,
                    fontweight="bold")
    for r, b, _, y in lanes:
        ax.axhline(y, color="#e0e0e0", lw=0.6, zorder=1)
        for k, op in enumerate(ops[r, b]):
            name = op["name"]
            fam = OP_FAMILY.get(name, "other")
            patch = FancyBboxPatch((k - box_w / 2, y - 0.34), box_w, 0.68, boxstyle="round,pad=0,rounding_size=0.08",
                                   fc=FAMILIES[fam][1], ec="#555555", lw=0.5, zorder=3)
            ax.add_patch(patch)
            ax.text(k, y, name, ha="center", va="center", zorder=4,
                    fontsize=_box_fontsize(name, box_w * cell_in * 72))
            boxes[r, b, k] = (patch, k, y)
    return boxes


def _draw_pipelines(ax, plan, lanes, ops):
    """A bar under the ops of each pipeline's body."""
    for r, b, _, y in lanes:
        k, shown = 0, len(ops[r, b])
        for op in plan["gpus"][r]["threadblocks"][b]["ops"]:
            n = len(op.get("ops", [])) if op.get("name") == "pipeline" else 0
            if n and k + 1 < shown:
                end = min(k + n, shown - 1)
                ax.plot([k + 0.6, end + 0.4], [y + 0.44] * 2, color="#b89b00", lw=1.2, zorder=2,
                        solid_capstyle="butt")
            k += 1 + n


def _landing(edge, lanes, nranks):
    """Where a write no op reads lands: the destination rank's lane of the source's threadblock
    position (else its last), just right of the source column, spread by source rank."""
    sr, sb, sk, dr = edge[:4]
    ys = [y for r, _, _, y in lanes if r == dr]
    return sk + 0.45 + 0.1 * sr / max(nranks - 1, 1), ys[min(sb, len(ys) - 1)]


def _draw_edges(ax, edges, boxes, lanes, nranks):
    """One arrow per edge whose ends are shown (gid edge-KIND-N), under the boxes; returns how
    many were drawn."""
    from matplotlib.patches import FancyArrowPatch
    drawn = 0
    for n, edge in enumerate(edges):
        sr, sb, sk, dr, db, dk, kind = edge
        src = boxes.get((sr, sb, sk))
        dst = boxes.get((dr, db, dk)) if db is not None else None
        if src is None or (db is not None and dst is None) or not any(r == dr for r, *_ in lanes):
            continue
        _, colour, style = EDGE_STYLE[kind]
        if dst is not None:
            ends = dict(posA=(src[1], src[2]), posB=(dst[1], dst[2]), patchA=src[0], patchB=dst[0])
        else:
            ends = dict(posA=(src[1], src[2]), posB=_landing(edge, lanes, nranks), patchA=src[0])
        arrow = FancyArrowPatch(**ends, arrowstyle="-|>", mutation_scale=7, lw=0.8, color=colour, ls=style,
                                alpha=0.8, connectionstyle="arc3,rad=0.1", zorder=2.5)
        arrow.set_gid(f"edge-{kind}-{n}")
        ax.add_patch(arrow)
        drawn += 1
    return drawn


def _legend(ax, plan, edges):
    """Legend: the op families present, then the arrow kinds."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    present = {OP_FAMILY.get(op["name"], "other") for g in plan["gpus"] for tb in g["threadblocks"]
               for op, _ in flat_ops(tb)}
    handles = [Patch(fc=c, ec="#555555", lw=0.5, label=lbl) for fam, (lbl, c) in FAMILIES.items() if fam in present]
    for kind in EDGE_STYLE:
        if any(e[6] == kind for e in edges):
            lbl, colour, style = EDGE_STYLE[kind]
            handles.append(Line2D([], [], color=colour, ls=style, lw=1.2, marker=">", markevery=[1], label=lbl))
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(handles), frameon=False,
              fontsize=8, handlelength=1.6, columnspacing=1.2, borderaxespad=0.3)


def draw_plan(plan, path, *, max_ops=None, title=None) -> int:
    """Draws the plan (JSON text, dict or file path) to path (.svg, .png, .pdf, ...: by suffix).
    max_ops: show at most that many ops per threadblock (a note says so). Returns the number of
    arrows drawn. ValueError for a malformed plan, ImportError without matplotlib."""
    data = load_plan(plan)
    edges = plan_edges(data)
    plt = _import_pyplot()
    lanes, ops, width, longest = _layout(data, max_ops)
    cell_in = min(0.75, max(0.22, 40.0 / max(width, 1) * 0.3))
    height = lanes[-1][3] + 1 if lanes else 1
    fig_w, fig_h = max(4.5, width * cell_in + 1.5), max(2.0, height * 0.3) + 1.4
    with plt.rc_context({"svg.fonttype": "none", "font.family": "DejaVu Sans"}):
        fig, ax = plt.subplots(figsize=(fig_w, fig_h))
        fig.subplots_adjust(top=1 - 0.75 / fig_h, bottom=0.55 / fig_h)  # fixed room for title and legend
        try:
            boxes = _draw_lanes(ax, data, lanes, ops, cell_in)
            _draw_pipelines(ax, data, lanes, ops)
            drawn = _draw_edges(ax, edges, boxes, lanes, len(data["gpus"]))
            ax.set_xlim(-0.6, width - 0.4)
            ax.set_ylim(height - 0.5, -0.6)
            ax.set_yticks([y for *_, y in lanes], [f"tb{tid}" for _, _, tid, y in lanes], fontsize=7)
            ax.set_xticks(range(width), [str(k) if width <= 60 or k % 5 == 0 else "" for k in range(width)],
                          fontsize=6)
            ax.set_xlabel("program order (op index within the threadblock; not timing)", fontsize=8)
            ax.tick_params(length=0)
            for side in ("top", "right", "left"):
                ax.spines[side].set_visible(False)
            _legend(ax, data, edges)
            note = f"  [first {max_ops} of {longest} ops per threadblock shown]" if max_ops and longest > max_ops else ""
            fig.suptitle(_title(data, title) + note, fontsize=11, x=0.01, y=1 - 0.08 / fig_h, ha="left", va="top")
            fig.savefig(path, bbox_inches="tight", dpi=110)
        finally:
            plt.close(fig)
    return drawn


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mscclpp.draw", description="Draw an execution plan (SVG/PNG/PDF).")
    ap.add_argument("plan", help="a plan JSON file")
    ap.add_argument("-o", "--output", required=True, help="the picture to write; its suffix picks the format")
    ap.add_argument("--max-ops", type=int, help="show at most N ops per threadblock")
    ap.add_argument("--title", help="replace the title")
    a = ap.parse_args(argv)
    try:
        draw_plan(a.plan, a.output, max_ops=a.max_ops, title=a.title)
    except (ValueError, ImportError, OSError) as e:
        print(f"{a.plan}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
