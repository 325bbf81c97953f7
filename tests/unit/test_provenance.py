"""provenance.stamp: exactly one valid origin on every copy, other headers untouched."""

from __future__ import annotations

from mirrorflow.provenance import HEADER, Origin, decode, find, stamp

ORIGIN = Origin("c1", "orders", 2, 41)


def test_a_message_without_origin_gets_one_appended_and_the_input_is_not_changed():
    headers = [("a", b"1"), ("b", None)]
    out = stamp(headers, ORIGIN)
    assert out == [("a", b"1"), ("b", None), (HEADER, b"c1:orders:2:41")]
    assert headers == [("a", b"1"), ("b", None)]


def test_a_valid_origin_of_the_same_topic_and_partition_is_kept_as_it_is():
    headers = [(HEADER, b"c3:orders:2:7"), ("a", b"1")]
    assert stamp(headers, ORIGIN) is headers
    assert find(stamp(headers, ORIGIN), "orders", 2) == Origin("c3", "orders", 2, 7)


def test_an_origin_of_another_topic_or_partition_proves_nothing_and_is_replaced():
    """Forwarded headers: an application derived the record from a copy in another place."""
    for forwarded in (b"c3:orders-raw:2:7", b"c3:orders:0:7"):
        headers = [("a", b"1"), (HEADER, forwarded)]
        assert find(headers, "orders", 2) is None
        assert stamp(headers, ORIGIN) == [("a", b"1"), (HEADER, b"c1:orders:2:41")]
    assert find([(HEADER, b"c3:orders:2:7")], "orders", 2) == Origin("c3", "orders", 2, 7)


def test_invalid_or_repeated_origins_are_replaced_by_exactly_one_valid_one_in_order():
    for bad in ([("a", b"1"), (HEADER, b"garbage"), ("b", b"2")],
                [(HEADER, b"c3:orders:2:7"), ("a", b"1"), (HEADER, b"c3:orders:2:7")],
                [(HEADER.encode(), b"c3:orders:2:7"), (HEADER, b"c4:orders:2:8")]):
        out = stamp(bad, ORIGIN)
        origins = [v for k, v in out if k in (HEADER, HEADER.encode())]
        assert origins == [b"c1:orders:2:41"], out
        assert [h for h in out if h[0] not in (HEADER, HEADER.encode())] == \
            [h for h in bad if h[0] not in (HEADER, HEADER.encode())]
    assert decode(b"c1:orders:2:41") == ORIGIN
