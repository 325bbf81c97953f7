"""The floors a link keeps after its source topic was recreated (mirrorflow.copy.state.held): pure parts."""

from __future__ import annotations

import pytest

from mirrorflow import copyflags, provenance
from mirrorflow.copy.state.checkpoints import CheckpointMeta
from mirrorflow.copy.state.held import Held, HeldUnknown, held_at_start, skipping_held
from mirrorflow.copy.task import PartitionTask


def _origin(cluster, offset, topic="t", partition=0):
    return provenance.Origin(cluster, topic, partition, offset)


def test_the_floors_round_trip_in_the_checkpoint_metadata():
    meta = CheckpointMeta("src", "tgt", None, 5, (("c3", 39), ("c4.eu-1", 0)))
    assert CheckpointMeta.decode(meta.encode()) == meta
    assert ";held=c3:39,c4.eu-1:0" in meta.encode()
    assert ";held" not in CheckpointMeta("src", "tgt").encode()
    assert CheckpointMeta.decode("mirrorflow:v1;source=a;target=b;held=c3:x,:4,c5:7").held == (("c5", 7),)


def test_a_copy_at_or_below_its_origins_floor_is_skipped_and_the_floor_goes_at_the_next_commit():
    held = Held("t", 0, {"c3": 10})
    assert held.skips(_origin("c3", 9)) and held.skips(_origin("c3", 10))
    assert held.floors() == ()  # read past it: the next checkpoint no longer keeps it
    held.forget()  # ... unless that transaction is aborted
    assert held.floors() == (("c3", 10),)
    assert not held.skips(_origin("c3", 11))
    held.settle()
    assert not held.skips(_origin("c3", 0))  # a later incarnation of c3's topic starts at 0 again
    assert held.floors() == ()


def test_other_origins_partitions_and_topics_are_never_skipped():
    held = Held("t", 0, {"c3": 10})
    assert not held.skips(None)
    assert not held.skips(_origin("c2", 0))
    assert not held.skips(_origin("c3", 0, partition=1))
    assert not held.skips(_origin("c3", 0, topic="u"))
    assert held.floors() == (("c3", 10),)


def _task(**kw):
    return PartitionTask("c1.L1", 1, "c1", "c2", "t", 0, 100, source_topic_id="new", target_topic_id="tgt", **kw)


def test_a_copy_starts_with_the_planners_floors_after_a_recreated_source_and_the_checkpoints_after_that():
    old = CheckpointMeta("old", "tgt", None, 1, (("c9", 1),)).encode()
    held = held_at_start(_task(held=(("c3", 10),)), old, "the source topic was recreated")
    assert held is not None and held.floors() == (("c3", 10),)
    with pytest.raises(HeldUnknown, match="recreated after this run was planned"):
        held_at_start(_task(), old, "the source topic was recreated")
    target_recreated = CheckpointMeta("new", "old-tgt").encode()
    assert held_at_start(_task(), target_recreated, "the target topic was recreated") is None
    kept = held_at_start(_task(), CheckpointMeta("new", "tgt", None, 1, (("c3", 4),)).encode(), None)
    assert kept is not None and kept.floors() == (("c3", 4),)
    assert held_at_start(_task(), CheckpointMeta("new", "tgt").encode(), None) is None


def test_the_decision_skips_held_copies_and_passes_everything_else_through():
    copy = [(copyflags.HEADER, b"4"), (provenance.HEADER, b"c3:t:0:5")]
    plain = lambda headers, offset: (headers, None)  # noqa: E731
    assert skipping_held(plain, None) is plain
    decide = skipping_held(plain, Held("t", 0, {"c3": 5}))
    assert decide(copy, 0) == (None, None)
    later = [(copyflags.HEADER, b"4"), (provenance.HEADER, b"c3:t:0:6")]
    assert decide(later, 1) == (later, None)
