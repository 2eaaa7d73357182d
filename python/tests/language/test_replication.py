"""Instance replication: blocks, channels, semaphores, barriers and chunk indices per instance."""
import pytest

from dsl_test_helpers import ops_of, plan_of
from mscclpp.language import DSLError
from mscclpp.language.channel import BufferType, MemoryChannel, SwitchChannel, SyncType
from mscclpp.language.collectives import AllReduce, TestCollective
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Buffer, Rank, Semaphore
from mscclpp.language.utils import ReplicationPolicy


def test_blocks_channels_and_chunks_interleave():
    with CollectiveProgram("r", AllReduce(2, 1, False), 2, instances=3) as prog:
        ch, back = MemoryChannel(1, 0), MemoryChannel(0, 1)
        src = Rank(0).get_input_buffer()
        ch.put(Rank(1).get_output_buffer()[1:2], src[0:1], tb=1)
        ch.signal(tb=1, data_sync=SyncType.none)
        back.wait(tb=0, data_sync=SyncType.none)
        Semaphore(0, 1)
        plan = plan_of(prog)
    gpu = plan["gpus"][0]
    assert (gpu["input_chunks"], gpu["output_chunks"]) == (6, 6)
    assert gpu["channels"] == [{"channel_type": "memory", "connected_to": [1, 1, 1]}]
    assert gpu["semaphores"] == [{"init_value": 1}] * 3
    assert [tb["id"] for tb in gpu["threadblocks"]] == [0, 1, 2, 3, 4, 5]
    for k in range(3):
        tb = gpu["threadblocks"][3 + k]  # block 1, instance k
        assert tb["channels"] == [{"channel_type": "memory", "channel_ids": [k]}]
        put = tb["ops"][0]
        assert put["src_buff"][0]["index"] == k and put["dst_buff"][0]["index"] == 3 + k
        assert tb["ops"][1] == {"name": "signal", "channel_ids": [0], "channel_type": "memory"}
    assert plan["gpus"][1]["threadblocks"][2]["channels"] == [{"channel_type": "memory", "channel_ids": [2]}]


def test_chunk_ranges_scale_with_their_size():
    with CollectiveProgram("r", TestCollective(1, 4, 4), 1, instances=2) as prog:
        r = Rank(0)
        r.copy(r.get_output_buffer()[2:4], r.get_input_buffer()[0:2], tb=0)
        plan = plan_of(prog)
    copies = [tb["ops"][0] for tb in plan["gpus"][0]["threadblocks"]]
    assert [(c["src_buff"][0]["index"], c["dst_buff"][0]["index"]) for c in copies] == [(0, 4), (2, 6)]
    assert all(c["src_buff"][0]["size"] == 2 for c in copies)


def test_barrier_and_semaphore_ids_per_instance():
    with CollectiveProgram("r", TestCollective(1, 1, 1), 1, instances=2) as prog:
        r = Rank(0)
        Semaphore(0, 0)
        s1 = Semaphore(0, 0)
        r.barrier(tb_list=[0, 1])
        s1.release(tb=0, data_sync=SyncType.none)
        s1.acquire(tb=1, data_sync=SyncType.none)
        plan = plan_of(prog)
    tbs = plan["gpus"][0]["threadblocks"]
    assert [tb["ops"][0] for tb in tbs] == [{"name": "barrier", "barrier_id": k, "num_threadblocks": 2}
                                           for k in (0, 1, 0, 1)]
    assert [tb["ops"][1]["semaphore_ids"] for tb in tbs] == [[2], [3], [2], [3]]


def test_switch_channels_and_offsets_per_instance():
    with CollectiveProgram("r", TestCollective(2, 2, 2), 2, instances=2) as prog:
        sw = SwitchChannel([0, 1], BufferType.input)
        c = Rank(1).get_input_buffer()[1:2]
        sw.at_rank(1).reduce(1, 1, c, tb=0)
        sw.at_rank(1).broadcast(c, 1, 1, tb=0)
        plan = plan_of(prog)
    gpu = plan["gpus"][1]
    assert len(gpu["channels"]) == 2 and gpu["channels"][0]["channel_type"] == "switch"
    (a,), (b,) = (tb["ops"] for tb in gpu["threadblocks"])
    assert a["src_buff"][0]["index"] == 2 and b["src_buff"][0]["index"] == 3
    assert [tb["channels"] for tb in gpu["threadblocks"]] == [[{"channel_type": "switch", "channel_ids": [k]}]
                                                            for k in (0, 1)]


def test_packet_copy_destination_moves_with_the_instance():
    with CollectiveProgram("r", TestCollective(1, 2, 2), 1, instances=2, protocol="LL") as prog:
        r, scratch = Rank(0), Buffer(0, 2)
        data = r.get_input_buffer()
        r.reduce(data[0:1], [scratch[0:1]], tb=0, packet=True)
        r.copy_packets(scratch[1:2], data[0:1], tb=0)
        r.copy_packets(scratch[0:1], r.get_output_buffer()[0:1], tb=1)  # the packets reduced
        plan = plan_of(prog)
    ops = [tb["ops"][0] for tb in plan["gpus"][0]["threadblocks"][:2]]
    assert [op["name"] for op in ops] == ["recpkt", "recpkt"]
    assert [op["dst_buff"][1]["index"] for op in ops] == [2, 3]


def test_policy_none():
    with CollectiveProgram("r", TestCollective(1, 1, 1), 1, replication_policy=ReplicationPolicy.none) as prog:
        r = Rank(0)
        r.copy(r.get_output_buffer()[0:1], r.get_input_buffer()[0:1], tb=0)
        assert ops_of(plan_of(prog))[0]["src_buff"][0]["index"] == 0
    with pytest.raises(DSLError):
        CollectiveProgram("r", TestCollective(1, 1, 1), 1, instances=2, replication_policy=ReplicationPolicy.none)
