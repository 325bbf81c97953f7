"""The onboarding backfill's copy-flags rule: copy everything, add the new cluster's bits."""

from __future__ import annotations

import pytest

from mirrorflow.copyflags import HEADER, INVALID_HEADER, backfill, decide
from mirrorflow.errors import MalformedCopyFlags


def test_a_message_without_the_header_gets_the_bits():
    d = backfill(0b101, [("trace", b"x")])
    assert (d.copy, d.flags_in, d.flags_out, d.malformed, d.reason, d.invalid) == (
        True, 0, 0b101, False, "backfill", ())
    assert d.headers_for_copy([("trace", b"x")]) == [("trace", b"x"), (HEADER, b"5")]


@pytest.mark.parametrize("flags_in, raw", [(0b001, b"1"), (0b011, b"3"), (0b100, b"4"), (0b111, b"7")])
def test_copies_whatever_the_flags_and_ors_the_bits(flags_in, raw):
    headers = [(HEADER, raw)]
    assert not decide(3, headers).copy  # the level-3 mask skips every one of these ...
    d = backfill(0b101, headers)
    assert d.copy  # ... the backfill copies them all
    assert (d.flags_in, d.flags_out, d.malformed) == (flags_in, flags_in | 0b101, False)
    assert d.headers_for_copy(headers) == [(HEADER, str(flags_in | 0b101).encode())]


def test_zero_bits_keep_the_flags():
    d = backfill(0, {HEADER: b"6"})
    assert (d.copy, d.flags_in, d.flags_out) == (True, 6, 6)


@pytest.mark.parametrize("raw", [b"x", b"", None, b"-1", b"01", b" 5"])
def test_a_malformed_header_counts_as_zero_and_is_marked(raw):
    headers = [("k", b"v"), (HEADER, raw)]
    d = backfill(0b110, headers)
    assert (d.copy, d.flags_in, d.flags_out, d.malformed) == (True, 0, 0b110, True)
    assert d.invalid == (raw,)
    assert d.reason.startswith("backfill: malformed copy flags header ")
    assert d.reason.endswith("; treated as flags 0")
    assert d.headers_for_copy(headers) == [("k", b"v"), (HEADER, b"6"), (INVALID_HEADER, raw)]


def test_conflicting_duplicates_are_malformed():
    d = backfill(0b1, [(HEADER, b"2"), (HEADER, b"4")])
    assert (d.flags_in, d.flags_out, d.malformed, d.invalid) == (0, 0b1, True, (b"2", b"4"))


def test_on_malformed_fail_raises():
    with pytest.raises(MalformedCopyFlags):
        backfill(0b1, [(HEADER, b"x")], on_malformed="fail")
    assert backfill(0b1, [(HEADER, b"2")], on_malformed="fail").flags_out == 0b11
