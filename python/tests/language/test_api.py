"""The public surface: modules, names, buffers and chunks, collectives, program settings."""
import json

import pytest

from dsl_test_helpers import names, ops_of, plan_of
from mscclpp.language import DSLError
from mscclpp.language.channel import BufferType, MemoryChannel, PortChannel, SwitchChannel, SyncType
from mscclpp.language.collectives import AllGather, AllReduce, AllToAll, ReduceScatter, SendRecv, TestCollective
from mscclpp.language.general import JSON
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Buffer, Rank, Semaphore
from mscclpp.language.thread_block_group import ThreadBlockGroup
from mscclpp.language.utils import AlgoSpec, ReplicationPolicy


def test_star_imports_give_what_programs_use():
    ns = {}
    for mod in ("channel", "rank", "general", "program", "collectives", "loop", "thread_block_group"):
        exec(f"from mscclpp.language.{mod} import *", ns)
    for name in ("CollectiveProgram", "JSON", "Rank", "Buffer", "Semaphore", "MemoryChannel", "PortChannel",
                 "SwitchChannel", "SyncType", "BufferType", "ReduceOperationType", "ThreadBlockGroup",
                 "TestCollective", "AllGather", "AllReduce", "ReduceScatter", "AllToAll", "SendRecv",
                 "LoopIterationContext", "AlgoSpec", "ReplicationPolicy", "ChannelType"):
        assert name in ns, name
    import mscclpp.language as lang
    assert lang.AlgoSpec is AlgoSpec and lang.ReplicationPolicy is ReplicationPolicy


@pytest.mark.parametrize("cls,n,cf,counts", [
    (AllReduce, 4, 2, (8, 8)), (AllGather, 4, 2, (2, 8)), (ReduceScatter, 4, 2, (8, 2)),
    (AllToAll, 3, 1, (3, 3)), (SendRecv, 4, 3, (3, 3)),
])
def test_collective_chunk_counts(cls, n, cf, counts):
    with CollectiveProgram("c", cls(n, cf, True), n) as prog:
        plan = plan_of(prog)
    gpu = plan["gpus"][1]
    assert (gpu["input_chunks"], gpu["output_chunks"]) == counts
    assert plan["collective"] == cls(n, cf, True).name and plan["inplace"] is True


def test_top_level_fields():
    with CollectiveProgram("p", TestCollective(2, 1, 1), 2, protocol="LL", reuse_resources=True,
                           num_threads_per_block=512, use_double_scratch_buffer=True, buffer_alignment=32,
                           min_message_size=1024, max_message_size=2048) as prog:
        plan = plan_of(prog)
    assert plan == {"name": "p", "collective": "test", "protocol": "LL", "inplace": False, "reuse_resources": True,
                    "gpus": plan["gpus"], "num_threads_per_block": 512, "use_double_scratch_buffer": True,
                    "buffer_alignment": 32, "min_message_size": 1024, "max_message_size": 2048}
    assert [g["id"] for g in plan["gpus"]] == [0, 1]
    assert plan["gpus"][0] == {"id": 0, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 0,
                               "threadblocks": [], "channels": [], "remote_buffers": [], "semaphores": []}


def test_from_spec_and_json_helper():
    spec = AlgoSpec(name="s", collective=AllReduce(2, 1, True), nranks_per_node=2, world_size=2, in_place=True,
                    instances=2, protocol="LL", auto_sync=False)
    with CollectiveProgram.from_spec(spec) as prog:
        Rank(0).copy(Rank(0).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0)
        text = JSON()
    plan = json.loads(text)
    assert plan["protocol"] == "LL" and plan["gpus"][0]["input_chunks"] == 4
    assert len(plan["gpus"][0]["threadblocks"]) == 2  # two instances
    assert prog.to_json() == text  # compiling does not change the recording


def test_slicing_into_chunks():
    with CollectiveProgram("p", TestCollective(2, 4, 2), 2):
        buf = Rank(1).get_input_buffer()
        c = buf[1:3]
        assert (c.rank, c.buffer, c.index, c.size) == (1, BufferType.input, 1, 2)
        assert buf[:].size == 4 and buf[2:].index == 2
        scratch = Buffer(1, 3)
        more = Buffer(1, 2)
        assert more[0:2].index == 3 and scratch[1:2].index == 1
        with pytest.raises(DSLError):
            buf[3:5]
        with pytest.raises(ValueError):
            buf[-1:2]
        with pytest.raises(ValueError):
            buf[0:4:2]
        with pytest.raises(TypeError):
            buf[0]


def test_scratch_and_semaphores_in_plan():
    with CollectiveProgram("p", TestCollective(1, 1, 1), 1) as prog:
        Buffer(0, 3)
        Buffer(0, 2)
        s0, s1 = Semaphore(0, 0), Semaphore(0, 2)
        assert (s0.id, s1.id) == (0, 1)
        s0.release(tb=1, data_sync=SyncType.none)
        s0.acquire(tb=0, data_sync=SyncType.none)
        plan = plan_of(prog)
    gpu = plan["gpus"][0]
    assert gpu["scratch_chunks"] == 5
    assert gpu["semaphores"] == [{"init_value": 0}, {"init_value": 2}]
    assert ops_of(plan, 0, 0) == [{"name": "sem_acquire", "semaphore_ids": [0]}]


def test_channels_tables():
    with CollectiveProgram("p", TestCollective(3, 2, 2), 3) as prog:
        a, b = MemoryChannel(1, 0), MemoryChannel(2, 0)
        MemoryChannel(0, 1), MemoryChannel(0, 2)
        p = PortChannel(1, 0)
        PortChannel(0, 1)
        sw = SwitchChannel([0, 1, 2], BufferType.output)
        b.put(Rank(2).get_input_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0)
        p.put(Rank(1).get_output_buffer()[1:2], Rank(0).get_input_buffer()[1:2], tb=0)
        a.get(Rank(0).get_output_buffer()[0:1], Rank(1).get_input_buffer()[0:1], tb=1)
        sw.at_rank(0).broadcast(Rank(0).get_input_buffer()[0:1], 0, 1, tb=2)
        plan = plan_of(prog)
    gpu = plan["gpus"][0]
    assert gpu["channels"] == [{"channel_type": "memory", "connected_to": [1, 2]},
                               {"channel_type": "port", "connected_to": [1]},
                               {"channel_type": "switch", "buffer_type": "o",
                                "rank_groups": [{"size": 3, "ranks": [0, 1, 2]}]}]
    assert gpu["remote_buffers"] == [{"rank": 2, "type": "i", "access_channel_types": ["memory"]},
                                     {"rank": 1, "type": "o", "access_channel_types": ["port"]},
                                     {"rank": 1, "type": "i", "access_channel_types": ["memory"]}]
    tb0 = gpu["threadblocks"][0]
    assert tb0["channels"] == [{"channel_type": "memory", "channel_ids": [1]},
                               {"channel_type": "port", "channel_ids": [0]}]
    assert tb0["remote_buffer_refs"] == [{"access_channel_type": "memory", "remote_buffer_ids": [0]},
                                         {"access_channel_type": "port", "remote_buffer_ids": [1]}]
    put, pput = tb0["ops"]
    assert put == {"name": "put", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                   "dst_buff": [{"buffer_id": 0, "index": 0, "size": 1}], "channel_type": "memory"}
    assert pput["channel_ids"] == [0] and pput["channel_type"] == "port"
    get = gpu["threadblocks"][1]["ops"][0]
    assert get == {"name": "get", "src_buff": [{"buffer_id": 0, "index": 0, "size": 1}],
                   "dst_buff": [{"type": "o", "index": 0, "size": 1}], "channel_ids": [0], "channel_type": "memory"}
    assert names(gpu["threadblocks"][2]["ops"]) == ["gstore"]
    assert gpu["threadblocks"][2]["ops"][0]["dst_buff"] == [{"switch_channel_id": 0, "index": 0, "size": 1}]


def test_thread_block_group_info():
    with CollectiveProgram("p", TestCollective(1, 4, 4), 1) as prog:
        r = Rank(0)
        g = ThreadBlockGroup([2, 0])
        assert g.numtb() == 2 and g.get_internal_id(0) == 1
        r.copy(r.get_output_buffer()[0:4], r.get_input_buffer()[0:4], tb_group=g)
        plan = plan_of(prog)
    assert ops_of(plan, 0, 2)[0]["tbg_info"] == {"tb_id": 0, "tbg_size": 2}
    assert ops_of(plan, 0, 0)[0]["tbg_info"] == {"tb_id": 1, "tbg_size": 2}
    assert plan["gpus"][0]["threadblocks"][1]["ops"] == []  # unused blocks below the highest stay
    with pytest.raises(ValueError):
        ThreadBlockGroup([1, 1])


def test_pipeline_op():
    from mscclpp.language.loop import LoopIterationContext
    with CollectiveProgram("p", TestCollective(1, 2, 2), 1) as prog:
        r = Rank(0)
        with LoopIterationContext(unit=1024, num_chunks=2):
            r.copy(r.get_output_buffer()[0:2], r.get_input_buffer()[0:2], tb=0)
            r.copy(r.get_output_buffer()[0:1], r.get_input_buffer()[0:1], tb=1)
        plan = plan_of(prog)
    loop = ops_of(plan, 0, 0)[0]
    assert loop["name"] == "pipeline" and loop["iter_context"] == {"unit_size": 1024, "num_chunks": 2}
    assert names(loop["ops"]) == ["copy"]
    assert names(ops_of(plan, 0, 1)) == ["pipeline"]


def test_program_context_restores_previous_and_outside_use_fails():
    with pytest.raises(DSLError):
        Rank(0)
    with CollectiveProgram("outer", TestCollective(1, 1, 1), 1) as outer:
        with CollectiveProgram("inner", TestCollective(2, 1, 1), 2):
            Rank(1)
        with pytest.raises(DSLError):
            Rank(1)  # back in the one-rank outer program
        assert plan_of(outer)["name"] == "outer"


def test_reduce_op_flush_and_relaxed_names():
    from mscclpp.language.channel import ReduceOperationType
    with CollectiveProgram("p", TestCollective(2, 2, 2), 2) as prog:
        r = Rank(0)
        data = r.get_input_buffer()
        r.reduce(data[0:1], [data[1:2]], tb=0, reduce_op=ReduceOperationType.max)
        p, _ = PortChannel(1, 0), PortChannel(0, 1)
        p.flush(tb=1, data_sync=SyncType.none)
        m, mback = MemoryChannel(1, 0), MemoryChannel(0, 1)
        m.signal(tb=2, data_sync=SyncType.none, relaxed=True)
        mback.wait(tb=0, data_sync=SyncType.none, relaxed=True)
        plan = plan_of(prog)
    assert ops_of(plan, 0, 0)[0]["name"] == "re" and ops_of(plan, 0, 0)[0]["reduce_op"] == "max"
    assert "channel_type" not in ops_of(plan, 0, 0)[0]
    assert ops_of(plan, 0, 1) == [{"name": "flush", "channel_ids": [0], "channel_type": "port"}]
    assert ops_of(plan, 0, 2) == [{"name": "rlxsignal", "channel_ids": [0], "channel_type": "memory"}]
    assert names(ops_of(plan, 1, 0)) == ["rlxwait"]
