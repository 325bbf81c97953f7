"""The executor's lanes (mirrorflow.copy.engine.executor.in_lanes): at most one large group at a time per Spark task.

Scheduling only: ``copy`` here is a function that records what runs when, so the
threads' interleaving is checked without brokers (the copies themselves are
tested against real brokers in tests/integration/test_copy_group.py).
"""

from __future__ import annotations

import threading

import pytest

from mirrorflow.copy.engine.executor import in_lanes, large
from mirrorflow.copy.task import PartitionTask
from mirrorflow.defaults import LARGE_GROUP_RECORDS

WAIT_S = 10.0  # a deadline for conditions that must come true, never a pause


def _group(n: int, records: int, **kw) -> list[PartitionTask]:
    return [PartitionTask(link_id="a.L1", level=1, source="a", target="b", topic="t", partition=n, end_offset=records,
                          planned_records=records, **kw)]


def test_large_is_by_planned_records_and_never_under_a_rate_cap():
    assert large(_group(0, LARGE_GROUP_RECORDS))
    assert not large(_group(0, LARGE_GROUP_RECORDS - 1))
    assert not large(_group(0, 10 * LARGE_GROUP_RECORDS, max_bytes_per_second=1e6))
    two = _group(0, LARGE_GROUP_RECORDS // 2) + _group(4, LARGE_GROUP_RECORDS // 2)
    assert large(two)


def test_one_large_group_at_a_time_while_small_ones_run_beside_it():
    groups = [_group(i, LARGE_GROUP_RECORDS) for i in range(3)] + [_group(10 + i, 10) for i in range(4)]
    lock = threading.Lock()
    running_large: list[int] = []
    overlaps: list[tuple[int, int]] = []
    small_ran_during_large = threading.Event()
    copied: list[int] = []

    def copy(group):
        n = group[0].partition
        if large(group):
            with lock:
                if running_large:
                    overlaps.append((running_large[0], n))
                running_large.append(n)
            # A small group must be able to run while this one holds its lane; if the
            # lanes blocked small groups behind large ones, this deadline would pass.
            assert small_ran_during_large.wait(WAIT_S) or n != 0
            with lock:
                running_large.remove(n)
        else:
            with lock:
                if running_large:
                    small_ran_during_large.set()
        with lock:
            copied.append(n)
        return [n]

    out = in_lanes(groups, copy, threads=4)
    assert out == [[g[0].partition] for g in groups]  # in the order of the groups
    assert sorted(copied) == sorted(g[0].partition for g in groups)  # each exactly once
    assert overlaps == []
    assert small_ran_during_large.is_set()


def test_a_failing_copy_is_raised_after_the_other_lanes_end():
    groups = [_group(i, 10) for i in range(5)]

    def copy(group):
        if group[0].partition == 2:
            raise RuntimeError("copier bug")
        return [group[0].partition]

    with pytest.raises(RuntimeError, match="copier bug"):
        in_lanes(groups, copy, threads=3)
