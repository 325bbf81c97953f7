"""Where a copy starts (mirrorflow.copy.state.copy_start): the one rule every copy path and the planner use."""

from __future__ import annotations

import pytest

from mirrorflow.copy.state.checkpoints import EARLIEST, copy_start, switch_mark, switched_to


def test_a_checkpoint_inside_the_source_is_where_the_copy_starts():
    start = copy_start(120, 100)
    assert (start.position, start.offset, start.lost, start.initialised, start.error) == (120, 120, 0, False, None)
    assert start.why == "the link's checkpoint is 120"


def test_a_checkpoint_at_the_earliest_offset_loses_nothing():
    start = copy_start(100, 100, require_contiguous=True)
    assert (start.offset, start.lost, start.error) == (100, 0, None)
    assert start.why == "the link's checkpoint is 100"


def test_without_a_checkpoint_a_link_starts_at_the_source_earliest_offset():
    start = copy_start(None, 40)
    assert (start.position, start.offset, start.initialised) == (None, 40, False)


def test_a_retention_gap_stops_the_copy_by_default_naming_the_range_and_its_count():
    start = copy_start(100, 150, source="c1")
    assert (start.position, start.lost) == (100, 50)
    assert start.error == ("retention gap: offsets 100..149 (50) are no longer on c1 and were never copied; the "
                           "partition stops at 100 (on_gap: fail; on_gap: skip steps over them with a recorded loss)")


def test_with_on_gap_skip_a_retention_gap_is_stepped_over_as_a_named_loss():
    start = copy_start(100, 150, on_gap="skip", source="c1")
    assert (start.position, start.offset, start.lost, start.error) == (100, 150, 50, None)
    assert start.why == "offsets 100..149 are no longer on c1 (retention) and were not copied"


def test_a_contiguous_copy_refuses_to_step_over_the_loss_whatever_on_gap_says():
    start = copy_start(100, 150, require_contiguous=True, on_gap="skip", source="c1")
    assert start.lost == 50
    assert start.error == ("offsets 100..149 are no longer on c1 (retention) and were not copied; nothing copied "
                           "past them (the archive must reach offset 150)")


@pytest.mark.parametrize("start_offset, expected", [(EARLIEST, 30), (35, 35)])
def test_an_onboarding_link_without_a_checkpoint_starts_where_it_is_told(start_offset, expected):
    start = copy_start(None, 30, start_offset=start_offset)
    assert (start.position, start.offset, start.initialised) == (expected, expected, True)


def test_an_onboarding_start_below_retention_is_a_loss_too():
    start = copy_start(None, 30, start_offset=10, require_contiguous=True, source="c2")
    assert (start.initialised, start.lost) == (True, 20)
    assert start.error is not None and "offsets 10..29 are no longer on c2" in start.error


def test_an_existing_checkpoint_wins_over_the_onboarding_start():
    start = copy_start(70, 30, start_offset=EARLIEST)
    assert (start.position, start.offset, start.initialised) == (70, 70, False)


def test_the_switch_mark_round_trips_and_plain_metadata_is_no_switch():
    assert switched_to(switch_mark("c4")) == "c4"
    assert switched_to("") is None
    assert switched_to(None) is None
    assert switched_to("something else") is None


def test_checkpoint_metadata_round_trips_and_foreign_metadata_is_none():
    from mirrorflow.copy.state.checkpoints import CheckpointMeta

    meta = CheckpointMeta("AAAA", "BBBB")
    assert CheckpointMeta.decode(meta.encode()) == meta
    assert CheckpointMeta.decode(CheckpointMeta("AAAA").encode()) == CheckpointMeta("AAAA", None)
    assert CheckpointMeta.decode("") is None
    assert CheckpointMeta.decode(switch_mark("c3")) is None


def test_a_checkpoint_of_another_topic_incarnation_is_set_aside_and_unknown_ids_are_trusted():
    from mirrorflow.copy.state.checkpoints import CheckpointMeta, set_aside

    written = CheckpointMeta("src-1", "tgt-1").encode()
    assert set_aside(written, "src-1", "tgt-1") is None
    assert set_aside(written, "src-2", "tgt-1").startswith("the source topic was recreated (topic id src-1 -> src-2)")
    assert set_aside(written, "src-1", "tgt-2").startswith("the target topic was recreated (topic id tgt-1 -> tgt-2)")
    assert set_aside(written, None, None) is None  # a copy that does not know the ids
    assert set_aside("", "src-2", "tgt-2") is None  # a checkpoint written before ids were recorded


def test_a_checkpoint_names_the_last_record_read_and_only_a_kept_checkpoint_trusts_it():
    from mirrorflow.copy.state.checkpoints import CheckpointMeta, copy_start, trusted_last
    from mirrorflow.copy.state.history import LastRead, fingerprint

    last = LastRead(99, fingerprint(b"k", b"v"))
    meta = CheckpointMeta("AAAA", "BBBB", last)
    assert CheckpointMeta.decode(meta.encode()) == meta
    assert meta.encode().endswith(f";last=99:{last.fingerprint}")
    assert LastRead.decode("99:xyz") is None and LastRead.decode("x:12345678") is None
    assert fingerprint(b"k", b"v") != fingerprint(b"k", b"w") and fingerprint(None, b"v") == fingerprint(b"", b"v")
    text = meta.encode()
    assert trusted_last(copy_start(100, 0), 100, text, None) == last
    assert trusted_last(copy_start(100, 0), 100, text, "recreated") is None  # set aside: another incarnation
    assert trusted_last(copy_start(100, 150, on_gap="skip"), 100, text, None) is None  # a gap stepped over
    assert trusted_last(copy_start(100, 0), 100, CheckpointMeta("AAAA").encode(), None) is None


def test_a_checkpoint_says_when_it_was_committed_and_an_old_one_is_kept_alive():
    from mirrorflow.copy.state.checkpoints import CheckpointMeta, needs_keep_alive

    meta = CheckpointMeta("AAAA", "BBBB").committed_now(None)
    assert meta.at is not None and CheckpointMeta.decode(meta.encode()) == meta
    text = CheckpointMeta("AAAA", "BBBB", None, 1_000).encode()
    assert text.endswith(";at=1000")
    assert not needs_keep_alive(text, 1_000 + 29, 30)
    assert needs_keep_alive(text, 1_000 + 30, 30)
    assert needs_keep_alive(CheckpointMeta("AAAA").encode(), 0, 30)  # no time recorded: commit once more
    assert needs_keep_alive("", 0, 30)
