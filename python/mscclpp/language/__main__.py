"""python -m mscclpp.language [-o PLAN.json] PROGRAM.py [ARGS...] [--draw PICTURE.svg]

Runs a DSL program file as a script (with ARGS as its command line) and writes the plan it prints
(print(JSON()) or print(prog.to_json())) to stdout or to PLAN.json. DSL errors are reported in one
line with exit status 1. --draw (last, or before PROGRAM.py) also draws the plan (mscclpp.draw)."""
import argparse
import io
import json
import os
import runpy
import sys
from contextlib import redirect_stdout

from mscclpp.language.errors import DSLError


def plan_text(printed: str) -> str:
    """The first JSON object in what the program printed ('' if none)."""
    decoder, at = json.JSONDecoder(), printed.find("{")
    while at >= 0:
        try:
            _, end = decoder.raw_decode(printed, at)
            return printed[at:end]
        except ValueError:
            at = printed.find("{", at + 1)
    return ""


def run_program(path: str, args: list) -> str:
    """What the program at `path` prints when run as __main__ with command line `args`."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [path] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    out = io.StringIO()
    try:
        with redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return out.getvalue()


def split_draw(args: list):
    """(program args, picture path or None): a trailing --draw FILE / --draw=FILE is ours."""
    if len(args) >= 2 and args[-2] == "--draw":
        return args[:-2], args[-1]
    if args and args[-1].startswith("--draw="):
        return args[:-1], args[-1].split("=", 1)[1]
    return args, None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mscclpp.language", description=__doc__.split("\n\n")[1])
    ap.add_argument("-o", "--output", help="write the plan here instead of stdout")
    ap.add_argument("--draw", metavar="PICTURE", help="also draw the plan (.svg, .png, .pdf; needs matplotlib)")
    ap.add_argument("program", help="a DSL program file")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the program's own arguments")
    a = ap.parse_args(argv)
    a.args, trailing = split_draw(a.args)
    a.draw = trailing or a.draw
    try:
        plan = plan_text(run_program(a.program, a.args))
    except DSLError as e:
        print(f"{a.program}: error: {e}", file=sys.stderr)
        return 1
    if not plan:
        print(f"{a.program}: error: the program printed no plan (end it with print(JSON()))", file=sys.stderr)
        return 1
    if a.output:
        with open(a.output, "w") as f:
            f.write(plan + "\n")
    else:
        sys.stdout.write(plan + "\n")
    if a.draw:
        from mscclpp.draw import draw_plan
        try:
            draw_plan(plan, a.draw)
        except (ImportError, ValueError, OSError) as e:
            print(f"{a.program}: error: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
