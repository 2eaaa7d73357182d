"""JSON(): the plan of the program being recorded."""
from mscclpp.language.internal.globals import get_program

__all__ = ["JSON"]


def JSON() -> str:
    return get_program().to_json()
