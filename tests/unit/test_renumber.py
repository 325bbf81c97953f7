"""mirror_carry_checkpoints' level map (mirrorflow.actions.parse_level_map): only order-keeping renumberings."""

from __future__ import annotations

import pytest

from mirrorflow.actions.renumber import CarryRefused, parse_level_map


def test_a_level_map_reads_old_to_new():
    assert parse_level_map("1:2,3:4") == {1: 2, 3: 4}
    assert parse_level_map(" 1 : 2 , 3 : 5 ") == {1: 2, 3: 5}


@pytest.mark.parametrize("text, why", [
    ("1:4,3:2", "does not keep the levels' order"),
    ("1:2,3:2", "does not keep the levels' order"),
    ("1:2,1:3", "old level 1 is mapped twice"),
    ("1-2", "is not <old level>:<new level>"),
    ("", "level_map is empty"),
])
def test_a_level_map_that_would_misread_copy_flags_is_refused(text, why):
    with pytest.raises(CarryRefused, match=why):
        parse_level_map(text)
