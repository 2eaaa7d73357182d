"""Fusion of adjacent ops of a thread block."""
from dsl_test_helpers import names, ops_of, plan_of
from mscclpp.language.channel import BufferType, MemoryChannel, PortChannel, SwitchChannel, SyncType
from mscclpp.language.collectives import TestCollective
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Buffer, Rank, Semaphore

NONE = SyncType.none


def two_ranks(fusion=True, auto_sync=True, n=2, chunks=4):
    return CollectiveProgram("f", TestCollective(n, chunks, chunks), n, instr_fusion=fusion, auto_sync=auto_sync)


def pair(cls=MemoryChannel, count=1):
    """count channels each way between ranks 0 and 1: (0->1 list, 1->0 list)."""
    return [cls(1, 0) for _ in range(count)], [cls(0, 1) for _ in range(count)]


def test_signals_and_waits_merge_per_channel_type():
    with two_ranks() as prog:
        out, back = pair(count=2)
        for ch in out:
            ch.signal(tb=0, data_sync=NONE)
        for ch in out:
            ch.wait(tb=0, data_sync=NONE)
        for ch in back:
            ch.signal(tb=0, data_sync=NONE)
            ch.wait(tb=0, data_sync=NONE)
        plan = plan_of(prog)
    assert ops_of(plan, 0) == [{"name": "signal", "channel_ids": [0, 1], "channel_type": "memory"},
                               {"name": "wait", "channel_ids": [0, 1], "channel_type": "memory"}]
    assert names(ops_of(plan, 1)) == ["signal", "wait", "signal", "wait"]


def test_same_channel_twice_does_not_merge_and_relaxed_stays_apart():
    with two_ranks() as prog:
        (ch,), (back,) = pair()
        ch.signal(tb=0, data_sync=NONE)
        ch.signal(tb=0, data_sync=NONE)
        ch.signal(tb=0, data_sync=NONE, relaxed=True)
        for _ in range(3):
            back.wait(tb=0, data_sync=NONE)
        plan = plan_of(prog)
    assert names(ops_of(plan, 0)) == ["signal", "signal", "rlxsignal"]
    assert names(ops_of(plan, 1)) == ["wait", "wait", "wait"]


def test_no_fusion_when_disabled():
    with two_ranks(fusion=False) as prog:
        out, back = pair(count=2)
        for ch in out:
            ch.signal(tb=0, data_sync=NONE)
        for ch in back:
            ch.wait(tb=0, data_sync=NONE)
        plan = plan_of(prog)
    assert names(ops_of(plan, 0)) == ["signal", "signal"]


def test_data_sync_barriers_are_not_doubled_between_sync_ops():
    with two_ranks() as prog:
        (ch,), (back,) = pair()
        ch.signal(tb=0)  # both
        ch.wait(tb=0)  # both
        back.signal(tb=0)
        back.wait(tb=0)
        plan = plan_of(prog)
    assert names(ops_of(plan, 0)) == ["nop", "signal", "nop", "wait", "nop"]
    with two_ranks(fusion=False) as prog:
        (ch,), (back,) = pair()
        ch.signal(tb=0)
        ch.wait(tb=0)
        back.signal(tb=0)
        back.wait(tb=0)
        plan = plan_of(prog)
    assert names(ops_of(plan, 0)) == ["nop", "signal", "nop", "nop", "wait", "nop"]


def test_puts_to_several_peers_merge():
    with two_ranks(n=3) as prog:
        a, b = MemoryChannel(1, 0), MemoryChannel(2, 0)
        MemoryChannel(0, 1), MemoryChannel(0, 2)
        src = Rank(0).get_input_buffer()
        a.put(Rank(1).get_output_buffer()[0:1], src[0:1], tb=0)
        b.put(Rank(2).get_output_buffer()[0:1], src[1:2], tb=0)
        b.put(Rank(2).get_output_buffer()[1:3], src[1:3], tb=0)  # other size: new op
        plan = plan_of(prog)
    first, second = ops_of(plan, 0)
    assert first["name"] == "put" and len(first["src_buff"]) == 2 and len(first["dst_buff"]) == 2
    assert [d["buffer_id"] for d in first["dst_buff"]] == [0, 1]
    assert second["src_buff"] == [{"type": "i", "index": 1, "size": 2}]


def test_port_puts_merge_with_channel_ids():
    with two_ranks() as prog:
        (p,), (back,) = pair(PortChannel)
        src, dst = Rank(0).get_input_buffer(), Rank(1).get_output_buffer()
        p.put_with_signal(dst[0:1], src[0:1], tb=0)
        p.put_with_signal(dst[1:2], src[1:2], tb=0)
        back.wait(tb=0, data_sync=NONE)
        back.wait(tb=0, data_sync=NONE)
        plan = plan_of(prog)
    (op,) = ops_of(plan, 0)
    assert op["name"] == "pws" and op["channel_ids"] == [0, 0] and len(op["src_buff"]) == 2


def test_reduce_then_put_is_reduce_send():
    with two_ranks() as prog:
        (ch,), _ = pair()
        r = Rank(0)
        buf, scratch = r.get_input_buffer(), Buffer(0, 2)
        r.reduce(buf[0:1], [scratch[0:1]], tb=0)
        r.reduce(buf[0:1], [scratch[1:2]], tb=0)  # same accumulator and destination: one reduce
        ch.put(Rank(1).get_output_buffer()[0:1], buf[0:1], tb=0)
        plan = plan_of(prog)
    (op,) = ops_of(plan, 0)
    assert op["name"] == "res" and op["channel_type"] == "memory" and op["reduce_op"] == "sum"
    assert [s["index"] for s in op["src_buff"]] == [0, 0, 1]
    assert op["dst_buff"] == [{"type": "i", "index": 0, "size": 1}, {"buffer_id": 0, "index": 0, "size": 1}]


def test_read_reduce_merges_and_sends():
    with two_ranks() as prog:
        (ch,), _ = pair()
        local, peer = Rank(0).get_input_buffer(), Rank(1).get_input_buffer()
        ch.reduce(local[0:1], [peer[0:1]], tb=0)
        ch.reduce(local[0:1], [peer[1:2]], tb=0)
        ch.put(Rank(1).get_output_buffer()[0:1], local[0:1], tb=0)
        plan = plan_of(prog)
    (op,) = ops_of(plan, 0)
    assert op["name"] == "rres" and len(op["src_buff"]) == 3 and len(op["dst_buff"]) == 2


def test_packet_reduce_copy_send():
    with CollectiveProgram("f", TestCollective(2, 2, 2), 2, protocol="LL") as prog:
        (ch,), (back,) = pair()
        r = Rank(0)
        data, scratch, peer = r.get_input_buffer(), Buffer(0, 4), Buffer(1, 2)
        back.put_packets(scratch[0:2], Rank(1).get_input_buffer()[0:2], tb=0)  # the packets rank 0 reduces
        Rank(1).unpack_packets(Rank(1).get_output_buffer()[0:2], peer[0:2], tb=1)
        r.reduce(data[0:1], [scratch[0:1]], tb=0, packet=True)
        r.copy_packets(scratch[2:3], data[0:1], tb=0)
        ch.read_put_packets(peer[0:1], scratch[2:3], tb=0)
        r.reduce(data[1:2], [scratch[1:2]], tb=1, packet=True)
        ch.put_packets(peer[1:2], data[1:2], tb=1)
        plan = plan_of(prog)
    (a,) = ops_of(plan, 0)
    assert a["name"] == "recspkt"
    assert a["dst_buff"] == [{"type": "i", "index": 0, "size": 1}, {"type": "s", "index": 2, "size": 1},
                             {"buffer_id": 0, "index": 0, "size": 1}]
    (b,) = ops_of(plan, 0, 1)
    assert b["name"] == "respkt"


def test_switch_reduce_and_store_fuse_to_glres():
    with two_ranks() as prog:
        sw = SwitchChannel([0, 1], BufferType.input)
        c = Rank(0).get_input_buffer()[1:2]
        sw.at_rank(0).reduce(1, 1, c, tb=0)
        sw.at_rank(0).broadcast(c, 1, 1, tb=0)
        sw.at_rank(1).reduce(0, 1, Rank(1).get_input_buffer()[0:1], tb=0)
        sw.at_rank(1).broadcast(Rank(1).get_input_buffer()[0:1], 2, 1, tb=0)
        plan = plan_of(prog)
    assert ops_of(plan, 0) == [{"name": "glres", "src_buff": [{"switch_channel_id": 0, "index": 1, "size": 1}],
                                "dst_buff": [{"switch_channel_id": 0, "index": 1, "size": 1}],
                                "channel_type": "switch", "reduce_op": "sum"}]
    # a different store offset: the destination offset is written (the reference repeats the source's)
    assert ops_of(plan, 1)[0]["dst_buff"] == [{"switch_channel_id": 0, "index": 2, "size": 1}]


def test_semaphore_ops_merge():
    with two_ranks() as prog:
        a, b = Semaphore(0, 1), Semaphore(0, 1)
        a.acquire(tb=0, data_sync=NONE)
        b.acquire(tb=0, data_sync=NONE)
        a.release(tb=0, data_sync=NONE)
        b.release(tb=0, data_sync=NONE)
        plan = plan_of(prog)
    assert ops_of(plan, 0) == [{"name": "sem_acquire", "semaphore_ids": [0, 1]},
                               {"name": "sem_release", "semaphore_ids": [0, 1]}]
