"""Pictures of mscclpp-perf results: bus bandwidth and time against message size, one line per
implementation (ours; NCCL from an --nccl run; NCCL on symmetric windows, "nccl-symm", from
--nccl-symm), datatype and operator of each results file.

    mscclpp-perf allreduce --json results.json ...        # (under mscclpp-run, mpirun, ...)
    python -m mscclpp.perfplot results.json [more.json ...] -o perf.png [--placement in] [--title TEXT]

    from mscclpp.perfplot import load_results, series, plot_results
    plot_results(["results.json"], "perf.png")

Loading and `series` are pure Python; only drawing needs matplotlib (`pip install mscclpp[draw]`).
The output format follows the suffix of the file name (png, svg, pdf)."""
import argparse
import json
import os
import sys

PLACEMENTS = {"out": "out_of_place", "in": "in_place"}


def load_results(path):
    """One mscclpp-perf --json document, checked for what the pictures need (ValueError saying
    what is missing otherwise)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("tool") != "mscclpp-perf" or not isinstance(doc.get("rows"), list):
        raise ValueError(f"{path}: not the --json output of mscclpp-perf (no \"tool\": \"mscclpp-perf\" with \"rows\")")
    for i, row in enumerate(doc["rows"]):
        if not isinstance(row, dict) or "bytes" not in row:
            raise ValueError(f"{path}: row {i} has no \"bytes\"")
    return doc


def _label(doc, impl, dtype, op, several_types):
    """A line's legend text: collective, ranks and kind, implementation, and the datatype and
    operator when a file holds several."""
    text = f"{doc.get('collective', '?')} {doc.get('nranks', '?')} {doc.get('rank_kind', '?')} ranks, {impl}"
    if several_types:
        text += f" ({dtype}{'' if op in (None, 'none') else ' ' + op})"
    return text


def series(doc, placement="out"):
    """[(label, impl, [bytes], [busbw GB/s], [time us])] of one document, one entry per
    (implementation, datatype, operator), sizes ascending; rows without a result (null) are left out."""
    key = PLACEMENTS[placement]
    groups = {}
    for row in doc["rows"]:
        r = row.get(key)
        if not r:
            continue
        g = (row.get("impl", "mscclpp"), row.get("datatype"), row.get("op"))
        groups.setdefault(g, []).append((row["bytes"], r["busbw_gbs"], r["time_us"]))
    several = len({(d, o) for _, d, o in groups}) > 1
    out = []
    for (impl, dtype, op), pts in groups.items():
        pts.sort()
        out.append((_label(doc, impl, dtype, op, several), impl, [p[0] for p in pts], [p[1] for p in pts],
                    [p[2] for p in pts]))
    return out


def _size_label(n, _pos=None):
    """Bytes as an axis label: 8, 1K, 64M, 1G."""
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return f"{n:.0f}"


def plot_results(paths, output, placement="out", title=None):
    """Draws busbw (left) and time (right) against size for every series of every file into output."""
    docs = [(p, load_results(p)) for p in paths]
    lines = [(os.path.basename(p), s) for p, d in docs for s in series(d, placement)]
    if not lines:
        raise ValueError("no results to draw (every row is empty for the %s-place placement)" % placement)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, (bw_ax, t_ax) = plt.subplots(1, 2, figsize=(12, 4.8))
    many_files = len(paths) > 1
    for name, (label, impl, sizes, busbw, times) in lines:
        style = dict(marker="o", markersize=3, linestyle={"nccl": "--", "nccl-symm": ":"}.get(impl, "-"))
        text = f"{label} [{name}]" if many_files else label
        bw_ax.plot(sizes, busbw, label=text, **style)
        t_ax.plot(sizes, times, label=text, **style)
    for ax, ylabel in ((bw_ax, "bus bandwidth (GB/s)"), (t_ax, "time per call (us)")):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
        ax.set_xlabel("message size (bytes, as nccl-tests counts them)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
    t_ax.set_yscale("log")
    bw_ax.legend(fontsize="small")
    first = docs[0][1]
    fig.suptitle(title or f"mscclpp-perf {first.get('collective', '')}: {placement}-of-place"
                 .replace("in-of-place", "in place").replace("out-of-place", "out of place"))
    fig.tight_layout()
    try:
        fig.savefig(output)
    finally:
        plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mscclpp.perfplot",
                                 description="Draw mscclpp-perf --json results: busbw and time against size.")
    ap.add_argument("results", nargs="+", help="mscclpp-perf --json files (NCCL rows of --nccl runs are drawn dashed, "
                                                         "nccl-symm rows of --nccl-symm dotted)")
    ap.add_argument("-o", "--output", required=True, help="the picture to write; its suffix picks the format")
    ap.add_argument("--placement", choices=sorted(PLACEMENTS), default="out",
                    help="out-of-place (out, the default) or in-place (in) results")
    ap.add_argument("--title", help="replace the title")
    a = ap.parse_args(argv)
    try:
        plot_results(a.results, a.output, a.placement, a.title)
    except (ValueError, OSError) as e:
        print(f"mscclpp.perfplot: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
