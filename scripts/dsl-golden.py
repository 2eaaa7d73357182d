#!/usr/bin/env python3
"""Regenerate (or, with --check, compare) the golden plans of the DSL examples.

Usage: scripts/dsl-golden.py [--check] [--dsl-path DIR | --ref GITDIR] [--only NAME]

Every program of examples/dsl (the list is examples/dsl/catalog.py) is compiled for 2, 4 and 8 ranks
into python/tests/golden/<example>_<n>.json (indented, keys sorted). The DSL is the one whose
mscclpp/language lies under DIR (default: $DSL_PATH, else the repository's python/); --ref takes it
from a git directory of the reference MSCCL++ instead (e.g. the one `fetch` writes), put in a
temporary stub `mscclpp` package, as the golden files were made (it needs `sortedcontainers`).
--check writes nothing: it prints a diff for each plan that differs from its golden file and exits
1 if any does (or any golden file is missing or belongs to no example).
"""
import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "dsl"))
import catalog  # noqa: E402


def pretty(doc):
    """The golden files' text form of a plan."""
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def reference_stub(gitdir, into):
    """A directory holding a `mscclpp` package with only the reference's language/ in it."""
    pkg = Path(into) / "mscclpp"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    archive = subprocess.run(["git", "--git-dir", str(gitdir), "archive", "HEAD", "python/mscclpp/language"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(pkg), "--strip-components=2"], input=archive, check=True)
    return str(into)


def one(name, n, check):
    """Compile one plan and write or compare it; True when nothing differs."""
    path = catalog.golden_path(name, n)
    try:
        text = pretty(json.loads(catalog.compile_example(name, n)))
    except (RuntimeError, ValueError) as e:
        print("%s_%d: %s" % (name, n, e))
        return False
    if not check:
        path.write_text(text)
        print("wrote", path.relative_to(ROOT))
        return True
    if not path.exists():
        print("%s: missing" % path.relative_to(ROOT))
        return False
    old = path.read_text()
    if json.loads(old) == json.loads(text):
        return True
    diff = difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(path.relative_to(ROOT)), "compiled")
    sys.stdout.writelines(list(diff)[:200])
    return False


def stale():
    """Golden files that belong to no example and rank count."""
    known = {catalog.golden_path(name, n).name for name in catalog.EXAMPLES for n in catalog.RANKS}
    folder = catalog.golden_path("x", 2).parent
    return sorted(p for p in folder.glob("*.json") if p.name not in known)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the golden files, write nothing")
    ap.add_argument("--dsl-path", help="directory holding mscclpp/language (default $DSL_PATH or python/)")
    ap.add_argument("--ref", type=Path, help="git directory of the reference MSCCL++ to take the DSL from")
    ap.add_argument("--only", default="", help="only examples whose name contains this")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if a.ref:
            os.environ["DSL_PATH"] = reference_stub(a.ref, tmp)
        elif a.dsl_path:
            os.environ["DSL_PATH"] = a.dsl_path
        catalog.golden_path("x", 2).parent.mkdir(parents=True, exist_ok=True)
        probe = catalog.dsl_run(["-c", "import mscclpp.language.program"])
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["?"])[-1]
            print("no DSL under %s: %s" % (catalog.dsl_path(), last))
            return 1
        ok = all([one(name, n, a.check) for name in catalog.EXAMPLES if a.only in name for n in catalog.RANKS])
    if a.check and not a.only:
        for p in stale():
            print("%s: belongs to no example" % p.relative_to(ROOT))
            ok = False
    if a.check:
        print("golden plans match" if ok else "golden plans differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
