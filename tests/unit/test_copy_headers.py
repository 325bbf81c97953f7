"""The copier's header fast paths give exactly what the general copy-flags and provenance rules give."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorflow import copyflags, provenance
from mirrorflow.copy.headers import CopyHeaders
from mirrorflow.errors import MalformedCopyFlags

SOURCE, TOPIC, PARTITION = "c1", "orders", 3


def general(headers, offset, *, level=2, backfill_flags=None, on_malformed="fresh"):
    """The rules as the copier applied them before the fast paths: decide, rewrite, stamp."""
    if backfill_flags is not None:
        decision = copyflags.backfill(backfill_flags, headers, on_malformed=on_malformed)
    else:
        decision = copyflags.decide(level, headers, on_malformed=on_malformed)
    if decision.flags_in and provenance.find(headers, TOPIC, PARTITION) is None:  # forwarded: fresh here
        headers = provenance.strip(copyflags.without(headers))
        return general(headers, offset, level=level, backfill_flags=backfill_flags, on_malformed=on_malformed)
    if not decision.copy:
        return None, None
    out = provenance.stamp(decision.headers_for_copy(headers),
                           provenance.Origin(SOURCE, TOPIC, PARTITION, offset))
    return out, decision.reason if decision.malformed else None


flag_values = st.one_of(
    st.integers(0, 15).map(copyflags.encode),  # valid, in a four-level tree
    st.sampled_from([b"", b"07", b"-1", b" 3", b"x", b"99999999999999999999", None]),  # malformed
)
origin_values = st.one_of(
    st.builds(lambda c, o: f"{c}:orders:3:{o}".encode(), st.sampled_from(["c1", "c2", "c9"]), st.integers(0, 10**6)),
    st.builds(lambda c, t, o: f"{c}:{t}:{o}".encode(), st.sampled_from(["c1", "c2"]),  # forwarded: another place
              st.sampled_from(["t:3", "orders:0", "orders-enriched:3", "order:3", "xorders:3"]), st.integers(0, 99)),
    st.sampled_from([b"", b"c1:orders:3", b"c1:orders:-1:4", b"\xff", b"c\xc3\xa9:orders:3:1", None]),  # invalid
    st.sampled_from([b"c1:orders:+3:4", b"c1:orders:3_0:4", b"c1:orders: 3:4", b"c1:orders:3:+4", b"::orders:3:1",
                     b"c1:orders:03:4"]),  # odd, but decode accepts some of them
)
other = st.tuples(st.sampled_from(["trace-id", "content-type", b"trace-id", copyflags.HEADER.encode()]),
                  st.one_of(st.none(), st.binary(max_size=8)))
header = st.one_of(
    st.tuples(st.just(copyflags.HEADER), flag_values),
    st.tuples(st.just(provenance.HEADER), origin_values),
    other,
)
headers_lists = st.one_of(
    st.none(),
    st.just([]),
    st.tuples(st.lists(other, max_size=2), st.tuples(st.just(copyflags.HEADER), flag_values),
              st.tuples(st.just(provenance.HEADER), origin_values)).map(
                  lambda t: [*t[0], t[1], t[2]]),  # the shape of an earlier hop's copy
    st.lists(header, max_size=5),
)


@settings(max_examples=600, deadline=None)
@given(messages=st.lists(st.tuples(headers_lists, st.integers(0, 2**40)), min_size=1, max_size=8),
       level=st.integers(1, 4), backfill=st.one_of(st.none(), st.integers(1, 15)))
def test_every_shape_gets_what_the_general_rules_give(messages, level, backfill):
    """Several messages through one instance, so remembered flags values are exercised as well."""
    headers = CopyHeaders(SOURCE, TOPIC, PARTITION, level=level, backfill_flags=backfill)
    for message_headers, offset in messages:
        assert headers.for_copy(message_headers, offset) == general(
            message_headers, offset, level=level, backfill_flags=backfill)


def test_a_fresh_message_gets_the_level_bit_and_its_own_origin():
    out, problem = CopyHeaders(SOURCE, TOPIC, PARTITION, level=3).for_copy(None, 42)
    assert out == [(copyflags.HEADER, b"4"), (provenance.HEADER, b"c1:orders:3:42")]
    assert problem is None


def test_the_applications_headers_stay_first_and_in_order():
    headers = CopyHeaders(SOURCE, TOPIC, PARTITION, level=3)
    fresh, _ = headers.for_copy([("trace-id", b"a"), ("trace-id", b"b")], 5)
    assert fresh == [("trace-id", b"a"), ("trace-id", b"b"), (copyflags.HEADER, b"4"),
                     (provenance.HEADER, b"c1:orders:3:5")]
    hop = CopyHeaders("c2", TOPIC, PARTITION, level=2).for_copy(fresh, 9)
    assert hop == ([("trace-id", b"a"), ("trace-id", b"b"), (copyflags.HEADER, b"6"),
                    (provenance.HEADER, b"c1:orders:3:5")], None)


def test_a_copy_already_distributed_at_the_level_is_skipped_and_one_from_above_keeps_its_origin():
    headers = CopyHeaders(SOURCE, TOPIC, PARTITION, level=2)
    copied_before = [(copyflags.HEADER, b"1"), (provenance.HEADER, b"c9:orders:3:7")]
    assert headers.for_copy(copied_before, 8) == (None, None)
    from_level_3 = [(copyflags.HEADER, b"4"), (provenance.HEADER, b"c9:orders:3:7")]
    assert headers.for_copy(from_level_3, 9) == ([(copyflags.HEADER, b"6"), (provenance.HEADER, b"c9:orders:3:7")],
                                                 None)


def test_a_malformed_flags_header_is_reported_every_time_it_is_seen():
    headers = CopyHeaders(SOURCE, TOPIC, PARTITION, level=1)
    bad = [(copyflags.HEADER, b"07"), (provenance.HEADER, b"c9:orders:3:7")]
    for offset in (1, 2):
        out, problem = headers.for_copy(bad, offset)
        assert "leading zero" in problem
        assert (copyflags.INVALID_HEADER, b"07") in out


def test_fail_policy_raises_on_the_fast_path_shape_too():
    headers = CopyHeaders(SOURCE, TOPIC, PARTITION, level=1, on_malformed="fail")
    with pytest.raises(MalformedCopyFlags):
        headers.for_copy([(copyflags.HEADER, b"x"), (provenance.HEADER, b"c9:orders:3:7")], 1)
