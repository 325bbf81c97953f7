"""mirror_resolve_gap's rule (mirrorflow.actions.gap.decide): never drop what the source holds, never copy twice."""

from __future__ import annotations

import pytest

from mirrorflow.actions.gap import Decision, ResolveRefused, decide


def test_skip_moves_past_a_retention_gap_and_names_the_loss():
    assert decide("skip", 100, 150, 200) == Decision(150, (100, 149))


@pytest.mark.parametrize("checkpoint, why", [(150, "there is no gap"), (170, "there is no gap"),
                                             (None, "no checkpoint")])
def test_skip_is_refused_without_a_gap(checkpoint, why):
    with pytest.raises(ResolveRefused, match=why):
        decide("skip", checkpoint, 150, 200)


def test_resume_forward_only_over_offsets_the_source_no_longer_holds():
    assert decide("resume_from", 100, 150, 200, requested=150) == Decision(150, (100, 149))
    assert decide("resume_from", 100, 150, 200, requested=120) == Decision(120, (100, 119))
    with pytest.raises(ResolveRefused, match=r"would drop offsets 150\.\.159, which the source still holds"):
        decide("resume_from", 100, 150, 200, requested=160)


def test_resume_backward_only_when_the_target_holds_no_copy_of_those_offsets():
    assert decide("resume_from", 180, 150, 200, requested=160, copies_on_target=0) == Decision(160)
    with pytest.raises(ResolveRefused, match=r"copy again 20 message\(s\) of offsets 160\.\.179"):
        decide("resume_from", 180, 150, 200, requested=160, copies_on_target=20)
    with pytest.raises(ResolveRefused, match="below the source's first offset 150"):
        decide("resume_from", 180, 150, 200, requested=140)


@pytest.mark.parametrize("requested, why", [(None, "needs an offset"), (-1, "needs an offset"),
                                            (201, "past the source's end 200"), (180, "nothing to change")])
def test_resume_from_refuses_what_makes_no_sense(requested, why):
    with pytest.raises(ResolveRefused, match=why):
        decide("resume_from", 180, 150, 200, requested=requested)


def test_an_unknown_action_names_the_choices():
    with pytest.raises(ResolveRefused, match="skip, resume_from"):
        decide("ignore", 100, 150, 200)


def test_a_lost_checkpoint_resumes_forward_only_over_offsets_the_target_holds_copies_of():
    assert decide("resume_from", None, 0, 60, requested=50, copies_on_target=50) == Decision(50)
    with pytest.raises(ResolveRefused, match="the target holds copies of only 49 of the 50 the link copies"):
        decide("resume_from", None, 0, 60, requested=50, copies_on_target=49)
    # the copy flags skip some of the offsets stepped over (copies the link never passes on): only the others count
    assert decide("resume_from", None, 0, 60, requested=50, copies_on_target=30, copyable=30) == Decision(50)
    with pytest.raises(ResolveRefused, match="copies of only 29 of the 30 the link copies"):
        decide("resume_from", None, 0, 60, requested=50, copies_on_target=29, copyable=30)
    # part of the way lies in a retention gap: that part is a recorded loss, the rest must be on the target
    assert decide("resume_from", 10, 20, 60, requested=30, copies_on_target=10) == Decision(30, (10, 19))


def test_rewind_goes_back_exactly_to_where_the_history_differs():
    from mirrorflow.copy.state.history import Difference

    differs = Difference(49, 64, "the source's record at offset 49 differs")
    assert decide("rewind", 64, 0, 80, difference=differs).position == 49
    assert decide("rewind", 64, 0, 80, requested=49, difference=differs).position == 49
    with pytest.raises(ResolveRefused, match="first differs at offset 49 .*offset 48 would copy again"):
        decide("rewind", 64, 0, 80, requested=48, difference=differs)
    with pytest.raises(ResolveRefused, match="offset 50 would skip messages the source wrote again"):
        decide("rewind", 64, 0, 80, requested=50, difference=differs)
    with pytest.raises(ResolveRefused, match="nothing to rewind: all the same"):
        decide("rewind", 64, 0, 80, difference=Difference(None, 64, "all the same"))
    with pytest.raises(ResolveRefused, match="no checkpoint"):
        decide("rewind", None, 0, 80, difference=differs)
