"""Block barriers: from data_sync requests and from chunk dependencies inside a thread block."""
import pytest

from dsl_test_helpers import names, ops_of, plan_of
from mscclpp.language.channel import BufferType, MemoryChannel, SwitchChannel, SyncType
from mscclpp.language.collectives import TestCollective
from mscclpp.language.loop import LoopIterationContext
from mscclpp.language.program import CollectiveProgram
from mscclpp.language.rank import Buffer, Rank


def one_rank(auto_sync=True, chunks=4):
    return CollectiveProgram("s", TestCollective(1, chunks, chunks), 1, auto_sync=auto_sync)


@pytest.mark.parametrize("sync,expect", [
    (SyncType.none, ["signal"]), (SyncType.before, ["nop", "signal"]),
    (SyncType.after, ["signal", "nop"]), (SyncType.both, ["nop", "signal", "nop"]),
])
def test_data_sync_places_block_barriers(sync, expect):
    with CollectiveProgram("s", TestCollective(2, 1, 1), 2) as prog:
        MemoryChannel(1, 0).signal(tb=0, data_sync=sync)
        MemoryChannel(0, 1).wait(tb=0, data_sync=SyncType.none)
        plan = plan_of(prog)
    assert names(ops_of(plan, 0)) == expect


def copies(r, pairs, tb=0):
    """r.copy(dst, src) for each ((dst buffer, index), (src buffer, index)) of pairs."""
    bufs = {"i": r.get_input_buffer(), "o": r.get_output_buffer()}
    for (db, di), (sb, si) in pairs:
        r.copy(bufs[db][di:di + 1], bufs[sb][si:si + 1], tb=tb)


@pytest.mark.parametrize("pairs,expect", [
    ([(("o", 0), ("i", 0)), (("i", 1), ("o", 0))], ["copy", "nop", "copy"]),  # read after write
    ([(("o", 0), ("i", 0)), (("i", 0), ("o", 1))], ["copy", "nop", "copy"]),  # write after read
    ([(("o", 0), ("i", 0)), (("o", 0), ("i", 1))], ["copy", "nop", "copy"]),  # write after write
    ([(("o", 0), ("i", 0)), (("o", 1), ("i", 0))], ["copy", "copy"]),  # read after read
    ([(("o", 0), ("i", 0)), (("o", 1), ("i", 1))], ["copy", "copy"]),  # disjoint
])
def test_dependencies_within_a_block(pairs, expect):
    with one_rank() as prog:
        copies(Rank(0), pairs)
        plan = plan_of(prog)
    assert names(ops_of(plan)) == expect


def test_no_dependency_barriers_without_auto_sync_or_across_blocks():
    with one_rank(auto_sync=False) as prog:
        copies(Rank(0), [(("o", 0), ("i", 0)), (("i", 0), ("o", 0))])
        plan = plan_of(prog)
    assert names(ops_of(plan)) == ["copy", "copy"]
    with one_rank() as prog:
        r = Rank(0)
        copies(r, [(("o", 0), ("i", 0))], tb=0)
        copies(r, [(("i", 0), ("o", 0))], tb=1)
        plan = plan_of(prog)
    assert names(ops_of(plan, 0, 1)) == ["copy"]


def test_barrier_resets_tracking():
    with one_rank() as prog:
        r = Rank(0)
        copies(r, [(("o", 0), ("i", 0))])
        r.barrier(tb_list=[0])
        copies(r, [(("i", 0), ("o", 0))])
        plan = plan_of(prog)
    assert names(ops_of(plan)) == ["copy", "nop", "copy"]


def test_partial_overlap_and_split_ranges():
    with one_rank() as prog:
        r = Rank(0)
        i, o = r.get_input_buffer(), r.get_output_buffer()
        r.copy(o[0:3], i[0:3], tb=0)  # writes o[0:3]
        r.barrier(tb_list=[0])
        r.copy(o[1:2], i[3:4], tb=0)  # writes o[1], o[0] and o[2] were forgotten by the barrier
        r.copy(i[0:1], o[0:1], tb=0)  # reads o[0]: untouched since the barrier
        r.copy(i[1:2], o[2:3], tb=0)  # reads o[2]: untouched
        r.copy(i[2:3], o[1:2], tb=0)  # reads o[1]: written by the second copy
        plan = plan_of(prog)
    assert names(ops_of(plan)) == ["copy", "nop", "copy", "copy", "copy", "nop", "copy"]


def test_an_ops_own_reads_do_not_hide_an_earlier_read():
    # put reads i[0]; the in-place reduce then reads and writes i[0]: the write needs a barrier
    # (the reference compiler lets the reduce's own read replace the put's and misses it)
    with CollectiveProgram("s", TestCollective(2, 2, 2), 2) as prog:
        ch = MemoryChannel(1, 0)
        MemoryChannel(0, 1)
        r, scratch = Rank(0), Buffer(0, 1)
        data = r.get_input_buffer()
        ch.put(Rank(1).get_output_buffer()[0:1], data[0:1], tb=0)
        r.reduce(data[0:1], [scratch[0:1]], tb=0)
        plan = plan_of(prog)
    assert names(ops_of(plan)) == ["put", "nop", "re"]


def test_conflict_keeps_all_accesses_of_the_op():
    # the second copy conflicts on its write (o[0]); its read of i[1] must still be remembered,
    # so the third copy (writing i[1]) gets a barrier too
    with one_rank() as prog:
        copies(Rank(0), [(("o", 0), ("i", 0)), (("o", 0), ("i", 1)), (("i", 1), ("i", 2))])
        plan = plan_of(prog)
    assert names(ops_of(plan)) == ["copy", "nop", "copy", "nop", "copy"]


def test_packet_accesses_need_no_barrier():
    with CollectiveProgram("s", TestCollective(1, 2, 2), 1, protocol="LL") as prog:
        r, scratch = Rank(0), Buffer(0, 2)
        data = r.get_input_buffer()
        r.copy_packets(scratch[0:1], data[0:1], tb=0)  # packet write: not tracked
        r.unpack_packets(data[1:2], scratch[0:1], tb=0)  # packet read: not tracked
        plan = plan_of(prog)
    assert names(ops_of(plan)) == ["cpkt", "upkt"]


def test_switch_ops_touch_local_chunks():
    with CollectiveProgram("s", TestCollective(2, 2, 2), 2) as prog:
        sw = SwitchChannel([0, 1], BufferType.input)
        r = Rank(0)
        sw.at_rank(0).reduce(0, 1, r.get_output_buffer()[0:1], tb=0)
        r.copy(r.get_input_buffer()[1:2], r.get_output_buffer()[0:1], tb=0)
        plan = plan_of(prog)
    assert names(ops_of(plan)) == ["glre", "nop", "copy"]


def test_loop_body_is_ordered_and_counts_as_one_op():
    with one_rank() as prog:
        r = Rank(0)
        with LoopIterationContext(unit=4096, num_chunks=1):
            copies(r, [(("o", 0), ("i", 0)), (("i", 1), ("o", 0))])
        copies(r, [(("o", 0), ("i", 3))])
        plan = plan_of(prog)
    loop, nop, copy = ops_of(plan)
    assert names(loop["ops"]) == ["copy", "nop", "copy"] and nop["name"] == "nop" and copy["name"] == "copy"


def test_nop_before_a_loop_that_starts_with_a_barrier_is_merged():
    with CollectiveProgram("s", TestCollective(2, 1, 1), 2) as prog:
        ch = MemoryChannel(1, 0)
        back = MemoryChannel(0, 1)
        r = Rank(0)
        r.barrier(tb_list=[0])
        with LoopIterationContext(unit=4096, num_chunks=1):
            ch.signal(tb=0, data_sync=SyncType.before)
            back.wait(tb=0, data_sync=SyncType.none)
        plan = plan_of(prog)
    (loop,) = ops_of(plan)
    assert names(loop["ops"]) == ["nop", "signal"]


def test_loop_ending_in_a_barrier_keeps_the_barrier_before_it():
    # a body that only ends in a block barrier does not stand for one before the loop
    with one_rank() as prog:
        r = Rank(0)
        r.barrier(tb_list=[0])
        with LoopIterationContext(unit=4096, num_chunks=1):
            copies(r, [(("o", 0), ("i", 0))])
            r.barrier(tb_list=[0])
        plan = plan_of(prog)
    assert names(ops_of(plan)) == ["nop", "pipeline"]
