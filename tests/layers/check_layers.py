#!/usr/bin/env python3
"""Keeps docs/architecture.md's one-way rule true: a layer of src/ may use its own layer and the
layers below it, never one above it, nor a peer of the same level.

Two readings, both must be clean:
  * sources: every `#include "dir/..."` of a file under src/ names a header of an allowed layer;
  * objects: every undefined symbol of an object of the library (nm) that another object of the
    library defines is defined in an allowed layer (what the compiler actually linked, including
    calls made through macros and inline functions of allowed headers).

A finding names the file (and line, or symbol) and the two layers. The stack itself is LAYERS
below, bottom first; docs/architecture.md draws the same list.

    check_layers.py SRC_DIR [OBJ_DIR]     exit 0 when clean, 1 with the findings listed
    check_layers.py --self-test           shows that each reading catches a planted violation
"""
import os
import re
import subprocess
import sys
import tempfile

# Bottom first. Each entry is (level, folder under src/): a folder may use folders of lower levels
# and itself; folders of one level (peers) may not use each other.
LAYERS = [
    (0, "util"),
    (1, "sys"),
    (2, "elem"),
    (3, "bootstrap"),
    (4, "transport"),
    (5, "core"),
    (6, "channel"),
    (7, "proxy"),
    (8, "plan"),
    (9, "algo"),
    (9, "exec"),
    (10, "coll"),
]
LEVEL = {name: level for level, name in LAYERS}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".def", ".inc")


def layer_of(rel_path):
    """The layer a path relative to src/ belongs to (its first folder), or None."""
    first = rel_path.split("/", 1)[0]
    return first if first in LEVEL else None


def allowed(user, used):
    """True when layer `user` may use layer `used`."""
    return used == user or LEVEL[used] < LEVEL[user]


def why(user, used):
    return "a peer layer" if LEVEL[used] == LEVEL[user] else "a layer above"


def check_sources(src):
    findings = []
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(SOURCE_EXT):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            user = layer_of(rel)
            if user is None:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    used = layer_of(m.group(1))
                    if used is not None and not allowed(user, used):
                        findings.append(f"src/{rel}:{lineno}: includes \"{m.group(1)}\": {user} uses {used}, "
                                        f"{why(user, used)}")
    return findings


def read_symbols(obj):
    """(defined, undefined) global symbol names of one object file."""
    out = subprocess.run(["nm", "-P", "-g", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        sym, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(sym)
        elif kind not in ("w", "v"):
            defined.add(sym)
    return defined, undefined


def objects(obj_dir):
    """(path relative to src/, object path) for each object of the library's sources."""
    for root, _, files in os.walk(obj_dir):
        for name in sorted(files):
            if name.endswith(".o"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, obj_dir)[: -len(".o")]
                if layer_of(rel) is not None:
                    yield rel, path


def check_objects(obj_dir):
    definer, uses = {}, []
    for rel, path in objects(obj_dir):
        defined, undefined = read_symbols(path)
        for sym in defined:
            definer.setdefault(sym, rel)
        uses.append((rel, undefined))
    findings = []
    for rel, undefined in uses:
        user = layer_of(rel)
        for sym in sorted(undefined):
            home = definer.get(sym)
            if home is None:
                continue
            used = layer_of(home)
            if not allowed(user, used):
                findings.append(f"src/{rel}: uses {sym} of src/{home}: {user} uses {used}, {why(user, used)}")
    return findings


def run(src, obj_dir):
    findings = check_sources(src)
    if obj_dir:
        findings += check_objects(obj_dir)
    for f in findings:
        print(f)
    layers = " < ".join(name for _, name in LAYERS)
    what = "sources and objects" if obj_dir else "sources"
    print(f"layers ({layers}): {len(findings)} finding(s) in the {what}")
    return 1 if findings else 0


def self_test():
    """Plants an upward include and an upward call in a scratch tree; both must be found."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        for d in ("util", "core", "coll"):
            os.makedirs(os.path.join(src, d))
        files = {
            "util/low.c": '#include "core/high.h"\nint high(void);\nint low(void) { return high(); }\n',
            "core/high.h": "int high(void);\n",
            "core/high.c": '#include "util/low.h"\nint high(void) { return 1; }\n',
            "util/low.h": "int low(void);\n",
            "coll/top.c": '#include "core/high.h"\nint top(void) { return high(); }\n',
        }
        for rel, text in files.items():
            with open(os.path.join(src, rel), "w") as f:
                f.write(text)
        obj = os.path.join(tmp, "obj")
        for rel in files:
            if rel.endswith(".c"):
                os.makedirs(os.path.join(obj, os.path.dirname(rel)), exist_ok=True)
                subprocess.run(["cc", "-c", "-I", src, os.path.join(src, rel), "-o", os.path.join(obj, rel + ".o")],
                               check=True)
        got = check_sources(src) + check_objects(obj)
        want = ['src/util/low.c:1: includes "core/high.h"', "src/util/low.c: uses high of src/core/high.c"]
        for w in want:
            if not any(g.startswith(w) for g in got):
                print(f"self-test: missed {w!r}; found {got}")
                return 1
        if len(got) != len(want):
            print(f"self-test: expected {len(want)} findings, found {got}")
            return 1
    print("self-test: both readings catch a planted upward reference, and nothing else")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) not in (2, 3):
        print(__doc__)
        return 2
    return run(argv[1], argv[2] if len(argv) == 3 else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
