"""Driver-side packing of partition work into Spark tasks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorflow.copy.txn_groups import TXN_GROUPS, transactional_id, txn_group, txn_unit
from mirrorflow.work import PartitionWork, cap, pack


def _w(p, records, size=0.0, link="c1.L1"):
    return PartitionWork(link, "orders", p, 100, 100 + records, size)


def test_cap_by_records_and_bytes():
    w = _w(0, 1000, size=100.0)
    assert cap(w, max_records=10).end == 110
    assert cap(w, max_bytes=5000).end == 150
    assert cap(w, max_records=10, max_bytes=5000).end == 110
    assert cap(w, max_bytes=10).end == 101  # always at least one record, or a huge record never moves
    assert cap(w) is w


def test_empty_ranges_are_dropped_and_no_empty_tasks():
    assert pack([_w(0, 0)], 4) == []
    bins = pack([_w(0, 5), _w(1, 0)], 4)
    assert bins == [[_w(0, 5)]]


def test_balances_by_bytes_when_known():
    works = [_w(0, 100, 1000.0), _w(1, 100, 10.0), _w(2, 100, 10.0), _w(3, 100, 10.0)]
    bins = pack(works, 2)
    heavy = next(b for b in bins if _w(0, 100, 1000.0) in b)
    assert heavy == [_w(0, 100, 1000.0)]  # the big partition gets a task of its own


def _optimum(weights: list[float], slots: int) -> float:
    """The smallest possible largest load (exhaustive; small inputs only)."""
    best = float("inf")

    def place(i: int, loads: list[float]) -> None:
        nonlocal best
        if max(loads) >= best:
            return
        if i == len(weights):
            best = max(loads)
            return
        for j in range(slots):
            loads[j] += weights[i]
            place(i + 1, loads)
            loads[j] -= weights[i]
            if loads[j] == 0:
                break  # empty bins are interchangeable

    place(0, [0.0] * slots)
    return best


def test_lpt_finds_the_optimum_where_a_naive_lower_bound_is_not_reached():
    # 5 ranges, 4 slots: two must share a task, so the best is 218 + 249 = 467, above max(346, total/4)
    bins = pack([_w(p, n) for p, n in enumerate([249, 218, 268, 282, 346])], 4)
    assert max(sum(w.weight for w in b) for b in bins) == _optimum([249, 218, 268, 282, 346], 4) == 467


def test_rejects_no_slots():
    import pytest

    with pytest.raises(ValueError, match="slots"):
        pack([_w(0, 1)], 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=60), st.integers(1, 16))
def test_every_partition_exactly_once_and_lpt_bound(sizes, slots):
    works = [_w(p, n) for p, n in enumerate(sizes)]
    bins = pack(works, slots)
    packed = [w for b in bins for w in b]
    assert sorted(packed, key=lambda w: w.partition) == [w for w in works if w.records > 0]
    assert len(bins) <= slots and all(bins)
    if packed:
        loads = [sum(w.weight for w in b) for b in bins]
        total, biggest, m = sum(loads), max(w.weight for w in packed), len(bins)
        # Graham's bound holds for any list scheduling, LPT included
        assert max(loads) <= total / m + (1 - 1 / m) * biggest + 1e-9
        if len(packed) <= 7:  # LPT's 4/3 guarantee is against the true optimum: find it by brute force
            assert max(loads) <= _optimum([w.weight for w in packed], m) * 4 / 3 + 1e-9
    assert pack(works, slots) == bins  # deterministic


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 70), st.integers(0, 500), st.sampled_from(["c1.L1", "c2.L1"])),
                max_size=60, unique_by=lambda t: (t[0], t[2])),
       st.integers(1, 9))
def test_packing_by_transaction_group_never_splits_a_group(parts, slots):
    works = [_w(p, n, link=link) for p, n, link in parts]
    bins = pack(works, slots, unit=txn_unit)
    assert len(bins) <= slots and all(bins)
    placed = [w for b in bins for w in b]
    assert sorted(placed, key=_key) == sorted((w for w in works if w.records), key=_key)  # each once
    home = {}
    for i, b in enumerate(bins):
        for w in b:
            assert home.setdefault(txn_unit(w), i) == i  # a group lives in one task
    assert pack(works, slots, unit=txn_unit) == bins  # deterministic


def test_transaction_groups_and_ids():
    g = TXN_GROUPS
    assert txn_group("orders", 1) == txn_group("orders", g + 1) == txn_group("orders", 7 * g + 1)
    assert txn_group("orders", 0) != txn_group("orders", 1)
    assert len({txn_group("orders", p) for p in range(1000)}) == g  # however many partitions a topic has
    assert transactional_id("c1.L1", "orders", 1) == transactional_id("c1.L1", "orders", g + 1)
    assert transactional_id("c1.L1", "orders", 1) != transactional_id("c1.L1", "orders", 2)
    assert transactional_id("c1.L1", "orders", 1) != transactional_id("c2.L1", "orders", 1)  # per link
    assert transactional_id("c1.L1", "orders", 1) != transactional_id("c1.L1", "payments", 1)  # per topic


def _key(w):
    return (w.link_id, w.topic, w.partition)


def test_a_copy_stops_where_its_links_window_closes_or_at_once_when_it_closed_before_the_plan():
    import time

    from mirrorflow.copy.plan.windows import window_end
    from mirrorflow.copy.spec import LinkJob

    assert window_end(LinkJob("c1.L1", 1, "c1", "c2")) is None  # no windows: copy all day
    assert window_end(LinkJob("c1.L1", 1, "c1", "c2", windows=("00:00-24:00",))) is None  # never closes
    hour = time.gmtime().tm_hour
    open_now = f"{hour:02d}:00-{hour + 1:02d}:00" if hour < 23 else "23:00-24:00"
    end = window_end(LinkJob("c1.L1", 1, "c1", "c2", windows=(open_now,)))
    assert end is not None and 0 < end - time.time() <= 3600
    closed_now = f"{(hour + 2) % 24:02d}:00-{(hour + 3) % 24:02d}:00"
    before = time.time()
    assert before <= window_end(LinkJob("c1.L1", 1, "c1", "c2", windows=(closed_now,))) <= time.time()
