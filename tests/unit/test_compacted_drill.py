"""Which records a compacted topic's drill-down excuses: what a log cleaner may have removed, and nothing else."""

from __future__ import annotations

from mirrorflow.completeness.drill import _Seen, _Side


def side(*records: tuple[int, bytes, str, int, int]) -> _Side:
    """A cluster's side holding ``(partition, key, origin, origin offset, timestamp)`` records."""
    s = _Side()
    for partition, key, origin, offset, ts in records:
        s.note_key(partition, key, origin, offset, ts)
    return s


def test_a_record_superseded_by_a_later_one_of_its_origin_is_compaction():
    held = side((0, b"k", "c1", 9, 1_000))
    assert held.explains("c1", (0, 4), _Seen(b"k", 500, tombstone=False))


def test_the_latest_record_of_a_key_is_never_excused():
    held = side((0, b"k", "c1", 3, 400))  # only an older record of the key is there
    assert not held.explains("c1", (0, 4), _Seen(b"k", 500, tombstone=False))


def test_a_later_record_of_another_origin_supersedes_by_time():
    held = side((0, b"k", "c2", 2, 900))
    assert held.explains("c1", (0, 4), _Seen(b"k", 500, tombstone=False))
    older = side((0, b"k", "c2", 2, 100))
    assert not older.explains("c1", (0, 4), _Seen(b"k", 500, tombstone=False))


def test_an_expired_tombstone_takes_its_key_along_but_a_lost_one_leaves_the_old_value():
    assert side().explains("c1", (0, 4), _Seen(b"k", 500, tombstone=True))
    assert not side((0, b"k", "c1", 3, 400)).explains("c1", (0, 4), _Seen(b"k", 500, tombstone=True))


def test_a_record_without_a_key_or_in_another_partition_is_never_excused():
    held = side((0, b"k", "c1", 9, 1_000))
    assert not held.explains("c1", (0, 4), _Seen(None, 500, tombstone=False))
    assert not held.explains("c1", (1, 4), _Seen(b"k", 500, tombstone=False))
