"""The MSCCL++ DSL: write a collective algorithm in Python, get an execution plan (JSON).

    from mscclpp.language.program import CollectiveProgram
    from mscclpp.language.collectives import AllReduce
    with CollectiveProgram("ar", AllReduce(2, 1, True), 2) as prog:
        ...  # Rank, MemoryChannel, PortChannel, SwitchChannel, Buffer calls
        plan = prog.to_json()

`python -m mscclpp.language PROGRAM.py [args]` runs a program file and writes its plan."""
from mscclpp.language.errors import DSLError, DSLValueError, SyncError
from mscclpp.language.utils import AlgoSpec, ReplicationPolicy

__all__ = ["AlgoSpec", "ReplicationPolicy", "DSLError", "DSLValueError", "SyncError"]
