"""What a copy does when the source's log moves under its reader: the same rule as at its start."""

from __future__ import annotations

from mirrorflow.copy.state.checkpoints import moved_under_copy, record_move
from mirrorflow.copy.task import PartitionResult, PartitionTask


def _task(on_gap="fail"):
    return PartitionTask(link_id="c1.L1", level=1, source="c1", target="c2", topic="t", partition=0,
                         end_offset=1000, on_gap=on_gap)


def _result():
    return PartitionResult("c1.L1", "c1", "c2", "t", 0, start_offset=0, next_offset=300, end_offset=1000)


def test_a_log_start_past_the_position_is_a_gap_decided_by_on_gap():
    stop = moved_under_copy(_task("fail"), 300, 700, 1000)
    assert (stop.position, stop.offset, stop.lost) == (300, 700, 400) and "on_gap: fail" in stop.error
    result = _result()
    assert not record_move(result, stop)
    assert (result.error_offset, result.lost_to_retention, result.lost_ranges) == (300, 400, [[300, 699]])

    skip = moved_under_copy(_task("skip"), 300, 700, 1000)
    result = _result()
    result.lost_to_retention, result.lost_offsets, result.lost_ranges = 5, [0, 4], [[0, 4]]  # a gap at its start
    assert record_move(result, skip) and skip.error is None and skip.offset == 700
    assert (result.lost_to_retention, result.lost_offsets, result.lost_ranges) == (405, [0, 4], [[0, 4], [300, 699]])

    restore = moved_under_copy(_task("restore"), 300, 700, 1000)
    assert "the next run restores them from the archive of c1" in restore.error


def test_an_end_below_the_position_is_a_truncation_that_stops_the_partition():
    moved = moved_under_copy(_task("skip"), 300, 0, 250)
    assert moved.lost == 0 and moved.error.startswith("source truncated: c1 t[0] now ends at 250, below offset 300")
    result = _result()
    assert not record_move(result, moved) and result.error_offset == 300 and result.lost_ranges == []


def test_a_range_the_source_still_holds_is_read_again_from_the_position():
    moved = moved_under_copy(_task(), 300, 0, 1000)
    assert (moved.offset, moved.lost, moved.error) == (300, 0, None)


def test_a_source_that_keeps_answering_out_of_range_for_what_it_holds_stops_the_partition():
    assert moved_under_copy(_task(), 300, 0, 1000, rereads=2).error is None
    stop = moved_under_copy(_task(), 300, 0, 1000, rereads=3)
    assert stop.error == ("c1 answered the read of t[0] at offset 300 with 'offset out of range' 4 times while it "
                          "holds 0..999; the partition stops there")
