"""The program that DSL calls record into (the one of the innermost active `with` block)."""
from mscclpp.language.errors import DSLError

_current = None


def set_program(program):
    global _current
    _current = program


def get_program():
    if _current is None:
        raise DSLError("no CollectiveProgram is active: use the DSL inside `with CollectiveProgram(...):`")
    return _current
