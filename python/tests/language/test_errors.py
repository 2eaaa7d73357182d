"""Programs that cannot become a correct plan raise DSLError (a RuntimeError) naming the problem."""
import pytest

from mscclpp.language import DSLError, SyncError
from mscclpp.language.channel import BufferType, MemoryChannel, PortChannel, SwitchChannel, SyncType
from mscclpp.language.collectives import TestCollective
from mscclpp.language.loop import LoopIterationContext
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Buffer, Rank, Semaphore
from mscclpp.language.thread_block_group import ThreadBlockGroup

NONE = SyncType.none


def prog(n=2, chunks=2, **kw):
    return CollectiveProgram("e", TestCollective(n, chunks, chunks), n, **kw)


def raises(exc, *words):
    """pytest.raises(exc) whose message contains every word."""
    return pytest.raises(exc, match="(?s)" + "".join(f"(?=.*{w})" for w in words))


def test_dsl_error_is_a_runtime_error():
    assert issubclass(DSLError, RuntimeError) and issubclass(SyncError, DSLError)


@pytest.mark.parametrize("make", [
    lambda: Rank(2), lambda: Rank(-1), lambda: MemoryChannel(5, 0), lambda: PortChannel(0, 3),
    lambda: Buffer(2, 1), lambda: Semaphore(7, 0), lambda: SwitchChannel([0, 4], BufferType.input),
])
def test_rank_out_of_range(make):
    with prog():
        with raises(DSLError, "out of range"):
            make()


def test_channel_to_itself():
    with prog():
        with raises(DSLError, "rank 1 to itself"):
            MemoryChannel(1, 1)


def test_chunk_checks():
    with prog(chunks=2):
        ch = MemoryChannel(1, 0)
        r0, r1 = Rank(0), Rank(1)
        with raises(DSLError, "out of range"):
            r0.get_input_buffer()[1:3]
        with raises(DSLError, "not on rank 1", "rank 0 output"):
            ch.put(r0.get_output_buffer()[0:1], r0.get_input_buffer()[0:1], tb=0)
        with raises(DSLError, "scratch"):
            ch.put_packets(r1.get_input_buffer()[0:1], r0.get_input_buffer()[0:1], tb=0)
        with raises(DSLError, "2 chunks", "has 1"):
            ch.put(r1.get_input_buffer()[0:2], r0.get_input_buffer()[0:1], tb=0)
        with raises(DSLError, "scratch"):
            r0.unpack_packets(r0.get_output_buffer()[0:1], r0.get_input_buffer()[0:1], tb=0)
        with raises(DSLError, "no other chunks"):
            r0.reduce(r0.get_input_buffer()[0:1], [], tb=0)
        from mscclpp.language.internal.types import Chunk
        with raises(DSLError, "out of range", "scratch"):
            r0.copy(r0.get_output_buffer()[0:1], Chunk(0, BufferType.scratch, 0, 1), tb=0)


def test_thread_block_arguments():
    with prog():
        r = Rank(0)
        src, dst = r.get_input_buffer()[0:1], r.get_output_buffer()[0:1]
        with raises(DSLError, "tb=", "tb_group="):
            r.copy(dst, src)
        with raises(DSLError, "thread block -1"):
            r.copy(dst, src, tb=-1)
        with raises(DSLError, "empty"):
            r.copy(dst, src, tb_group=ThreadBlockGroup([]))
        with raises(DSLError, "no thread blocks"):
            r.barrier(tb_list=[])


def test_switch_channel_checks():
    with prog():
        sw = SwitchChannel([0, 1], BufferType.input)
        with raises(DSLError, "rank 2 is not in"):
            sw.at_rank(2)
        with raises(DSLError, "out of range"):
            sw.at_rank(0).reduce(1, 2, Rank(0).get_output_buffer()[0:2], tb=0)
        with raises(DSLError, "packets"):
            sw.at_rank(0).broadcast_packets(Buffer(0, 1)[0:1], 0, 1, tb=0)


def test_nested_loops():
    with prog():
        with LoopIterationContext(unit=1024, num_chunks=1):
            with raises(DSLError, "nested"):
                with LoopIterationContext(unit=1024, num_chunks=1):
                    pass


def test_signal_without_wait():
    with prog() as p:
        MemoryChannel(1, 0).signal(tb=0)
        MemoryChannel(0, 1)
        with raises(SyncError, "rank 0", "rank 1", "memory"):
            p.to_json()


def test_put_with_signal_needs_a_wait():
    with prog() as p:
        ch, back = PortChannel(1, 0), PortChannel(0, 1)
        ch.put_with_signal(Rank(1).get_input_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0)
        with raises(SyncError, "port"):
            p.to_json()
        back.wait(tb=0)
        p.to_json()


def test_waits_on_the_wrong_channel_of_a_pair():
    with prog() as p:
        a0, _ = MemoryChannel(1, 0), MemoryChannel(1, 0)
        _, b1 = MemoryChannel(0, 1), MemoryChannel(0, 1)
        a0.signal(tb=0, data_sync=NONE)
        b1.wait(tb=0, data_sync=NONE)  # pairs with a1, which never signals
        with raises(SyncError, "channel #0", "rank 0 to rank 1"):
            p.to_json()


def test_signal_in_a_loop_and_wait_outside():
    with prog() as p:
        ch, back = MemoryChannel(1, 0), MemoryChannel(0, 1)
        with LoopIterationContext(unit=1024, num_chunks=1):
            ch.signal(tb=0, data_sync=NONE)
        back.wait(tb=0, data_sync=NONE)
        with raises(SyncError, "loop"):
            p.to_json()


def test_unpaired_channels():
    with prog() as p:
        MemoryChannel(1, 0)
        with raises(DSLError, "rank 0 has 1 memory", "rank 1 has 0"):
            p.to_json()


def test_circular_wait_hangs():
    with prog() as p:
        ch, back = MemoryChannel(1, 0), MemoryChannel(0, 1)
        ch.wait(tb=0, data_sync=NONE)  # rank 0 waits for rank 1 first ...
        ch.signal(tb=0, data_sync=NONE)
        back.wait(tb=0, data_sync=NONE)  # ... and rank 1 for rank 0
        back.signal(tb=0, data_sync=NONE)
        with raises(SyncError, "would hang", "rank 0 thread block 0", "rank 1 thread block 0"):
            p.to_json()


def test_barrier_not_reached_hangs():
    with prog() as p:
        ch, back = MemoryChannel(1, 0), MemoryChannel(0, 1)
        r = Rank(0)
        ch.wait(tb=1, data_sync=NONE)  # rank 0 block 1 waits for rank 1 before the barrier ...
        r.barrier(tb_list=[0, 1])
        ch.signal(tb=0, data_sync=NONE)  # ... block 0 signals rank 1 only after it ...
        back.wait(tb=0, data_sync=NONE)  # ... and rank 1 signals only once signalled
        back.signal(tb=0, data_sync=NONE)
        with raises(SyncError, "would hang", "barrier"):
            p.to_json()


def test_semaphore_never_released_hangs():
    with prog(n=1) as p:
        s = Semaphore(0, 0)
        s.acquire(tb=0)
        with raises(SyncError, "would hang", "sem_acquire"):
            p.to_json()
        s.release(tb=1)
        p.to_json()


def test_bad_settings():
    with raises(DSLError, "protocol"):
        prog(protocol="LL128")
    with raises(DSLError, "instances"):
        prog(instances=0)


def test_packets_nobody_writes():
    with prog(n=1, protocol="LL") as p:
        r, scratch = Rank(0), Buffer(0, 2)
        r.copy_packets(scratch[0:1], r.get_input_buffer()[0:1], tb=0)
        r.unpack_packets(r.get_output_buffer()[0:2], scratch[0:2], tb=1)
        with raises(SyncError, "rank 0 thread block 1", "upkt", "scratch chunk 1", "wait forever"):
            p.to_json()


def test_packet_ops_need_ll():
    with prog(n=1) as p:
        r, scratch = Rank(0), Buffer(0, 1)
        r.copy_packets(scratch[0:1], r.get_input_buffer()[0:1], tb=0)
        with raises(DSLError, "cpkt", "Simple", "LL"):
            p.to_json()


def test_port_put_packets_sends_scratch_packets():
    with prog(protocol="LL") as p:
        ch, _ = PortChannel(1, 0), PortChannel(0, 1)
        peer = Buffer(1, 1)
        with raises(DSLError, "source", "scratch"):
            ch.put_packets(peer[0:1], Rank(0).get_input_buffer()[0:1], tb=0)
        mine = Buffer(0, 1)
        ch.put_packets(peer[0:1], mine[0:1], tb=0)
        with raises(SyncError, "ppkt reads packets", "scratch chunk 0"):
            p.to_json()
        Rank(0).copy_packets(mine[0:1], Rank(0).get_input_buffer()[0:1], tb=1)
        p.to_json()


def test_loop_ops_fit_num_chunks():
    with prog(chunks=2) as p:
        r = Rank(0)
        with LoopIterationContext(unit=1024, num_chunks=1):
            r.copy(r.get_output_buffer()[0:2], r.get_input_buffer()[0:2], tb=0)
        with raises(DSLError, "copy", "num_chunks 1", "2 chunks"):
            p.to_json()


def test_packets_written_only_after_their_reader_hang():
    with prog(n=1, protocol="LL") as p:
        r, scratch = Rank(0), Buffer(0, 1)
        r.unpack_packets(r.get_output_buffer()[0:1], scratch[0:1], tb=0)  # waits for the packets ...
        r.copy_packets(scratch[0:1], r.get_input_buffer()[0:1], tb=0)  # ... its own block writes later
        with raises(SyncError, "would hang", "upkt"):
            p.to_json()
