#!/usr/bin/env bash
# The Python package's tests (make test runs them after ctest): a virtual environment in
# BUILD/pyenv, the package installed from this checkout (CPU-only build: the tests run CPU ranks)
# with its test extras from PyPI, then pytest over python/tests.
#   scripts/python-test.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
py=${PYTHON:-python3}
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  { echo "python-test: $($py --version 2>&1) is older than 3.10" >&2; exit 1; }
# Python.h (for the extension) and venv come with Debian's python3-dev / python3-venv when the
# interpreter is Debian's; other interpreters (pyenv, conda) carry both.
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$inc/Python.h" ] || scripts/install-deps.sh python3-dev
"$py" -c 'import ensurepip' 2>/dev/null || scripts/install-deps.sh python3-venv
env="$build/pyenv"
[ -x "$env/bin/python" ] || "$py" -m venv "$env"
"$env/bin/python" -m pip install -q --upgrade pip
"$env/bin/python" -m pip install -q ".[test]" -C cmake.define.MSCCLPP_USE_CUDA=OFF -C build-dir="$build/pybuild"
# PyTorch for the torch.distributed backend's tests (python/tests/test_torch_*.py, CPU ranks
# through gloo and the backend): PyPI's wheel (with its CUDA libraries, ~1.7 GB; pip's cache
# keeps it between runs). MSCCLPP_TEST_TORCH=0 leaves it out; without torch those tests skip.
if [ "${MSCCLPP_TEST_TORCH:-1}" != 0 ] && ! "$env/bin/python" -c 'import torch' 2>/dev/null; then
  "$env/bin/python" -m pip install -q "torch==${MSCCLPP_TEST_TORCH_VERSION:-2.11.0}" ||
    echo "python-test: torch could not be installed; the torch backend's tests will skip" >&2
fi
"$env/bin/python" -m pytest -q python/tests
