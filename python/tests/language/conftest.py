"""DSL tests: the DSL importable (the installed package's, else the source tree's), and no program
left active between tests."""
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[2]
try:  # the installed package carries the DSL; the source tree's copy only when none is installed
    import mscclpp.language  # noqa: F401
except ImportError:
    sys.path.insert(0, str(PYTHON_DIR))

from mscclpp.language.internal import globals as dsl_globals  # noqa: E402


@pytest.fixture(autouse=True)
def no_active_program():
    dsl_globals.set_program(None)
    yield
    dsl_globals.set_program(None)
