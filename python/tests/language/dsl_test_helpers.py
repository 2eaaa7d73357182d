"""Small helpers for reading plans in the DSL tests."""
import json


def plan_of(prog) -> dict:
    """The parsed plan of a program."""
    return json.loads(prog.to_json())


def ops_of(plan: dict, rank: int = 0, tb: int = 0) -> list:
    return plan["gpus"][rank]["threadblocks"][tb]["ops"]


def names(ops: list) -> list:
    return [op["name"] for op in ops]
