"""Copy flags: encoding, the decision rule, header rewriting, malformed headers.

The worked examples of the Axual distribution model are checked flag by flag;
tests/unit/test_distribution_property.py checks the rule over random trees.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorflow import copyflags
from mirrorflow.copyflags import HEADER, INVALID_HEADER, MAX_FLAGS, decide, decode, encode, rewrite_headers
from mirrorflow.errors import CopyFlagsError, MalformedCopyFlags, MirrorflowError
from mirrorflow.topology import Topology, load_topology

from .simulate import exactly_once, simulate

REPO = Path(__file__).resolve().parents[2]


def flags_header(value: bytes | None) -> list:
    return [(HEADER, value)]


# --------------------------------------------------------------------------- bits


def test_contract_constants():
    assert HEADER == "mirror.copy.flags"
    assert INVALID_HEADER == "mirror.copy.flags.invalid"
    assert MAX_FLAGS == 2**63 - 1


def test_bits_and_masks():
    assert [copyflags.bit(lv) for lv in (1, 2, 3, 63)] == [0b1, 0b10, 0b100, 2**62]
    assert [copyflags.mask(lv) for lv in (1, 3, 63)] == [0b1, 0b111, 2**63 - 1]
    assert copyflags.levels_of(0b101) == [1, 3] and copyflags.levels_of(0) == []
    for bad in (0, 64, -1, True, 1.0):
        with pytest.raises(CopyFlagsError):
            copyflags.mask(bad)


# --------------------------------------------------------------------------- encoding


@pytest.mark.parametrize("flags, raw", [(0, b"0"), (1, b"1"), (5, b"5"), (0b0101, b"5"), (4, b"4"),
                                        (MAX_FLAGS, b"9223372036854775807")])
def test_encode_is_ascii_decimal(flags, raw):
    assert encode(flags) == raw and decode(raw) == flags


@given(st.integers(min_value=0, max_value=MAX_FLAGS))
@settings(max_examples=300, deadline=None)
def test_round_trip(flags):
    raw = encode(flags)
    assert decode(raw) == flags
    assert decode(bytearray(raw)) == flags and decode(memoryview(raw)) == flags
    assert encode(decode(raw)) == raw  # one byte form per value


@given(st.binary(max_size=24))
@settings(max_examples=300, deadline=None)
def test_decode_accepts_exactly_what_encode_writes(raw):
    try:
        flags = decode(raw)
    except MalformedCopyFlags as exc:
        assert exc.raw == raw
    else:
        assert encode(flags) == raw


@pytest.mark.parametrize("flags", [-1, MAX_FLAGS + 1, 2**64, True, 1.0, "5", None])
def test_encode_refuses_what_does_not_fit_a_signed_long(flags):
    with pytest.raises(CopyFlagsError):
        encode(flags)


@pytest.mark.parametrize("raw, reason", [
    (None, "null"),
    (b"", "empty"),
    (b"abc", "not ASCII decimal digits"),
    (b"0x5", "not ASCII decimal digits"),
    (b"1.0", "not ASCII decimal digits"),
    (b"\xd9\xa3", "not ASCII decimal digits"),  # ARABIC-INDIC DIGIT THREE: a digit, but not ASCII
    (b"\xff\xfe", "not ASCII decimal digits"),
    (b"-1", "signed"),
    (b"+1", "signed"),
    (b" 1", "whitespace"),
    (b"1 ", "whitespace"),
    (b"1\n", "whitespace"),
    (b"01", "leading zero"),
    (b"00", "leading zero"),
    (b"9223372036854775808", "64-bit"),      # 2**63
    (b"99999999999999999999", "64-bit"),     # 20 digits
    (b"1" * 25, "longer than 19 digits"),
    ("5", "expected bytes, got str"),
])
def test_decode_malformed(raw, reason):
    with pytest.raises(MalformedCopyFlags) as info:
        decode(raw)
    assert reason in info.value.reason and info.value.raw == raw
    assert repr(raw) in str(info.value)
    assert isinstance(info.value, (MirrorflowError, ValueError))


# --------------------------------------------------------------------------- the rule


def test_no_header_means_zero():
    for headers in (None, [], [("other", b"x")], {"other": b"x"}):
        d = decide(3, headers)
        assert (d.copy, d.flags_in, d.flags_out, d.malformed) == (True, 0, 0b100, False)


def test_four_cluster_example_flag_by_flag():
    """The walk-through of the Axual model: levels 1 and 3, a message produced at c1."""
    # 1. at c1, no header: both distributors copy
    l1, l3 = decide(1, None), decide(3, None)
    assert (l1.copy, l1.flags_out) == (True, 0b0001)  # to c2
    assert (l3.copy, l3.flags_out) == (True, 0b0100)  # to c3
    # 2. at c2 (flags 0001): both skip
    at_c2 = flags_header(encode(0b0001))
    assert not decide(1, at_c2).copy and not decide(3, at_c2).copy
    # 3. at c3 (flags 0100): level 3 skips, level 1 copies to c4 with 0101
    at_c3 = flags_header(encode(0b0100))
    assert not decide(3, at_c3).copy
    l1_c3 = decide(1, at_c3)
    assert (l1_c3.copy, l1_c3.flags_in, l1_c3.flags_out) == (True, 0b0100, 0b0101)
    # 4. at c4 (flags 0101): both skip
    at_c4 = flags_header(encode(0b0101))
    assert not decide(1, at_c4).copy and not decide(3, at_c4).copy
    assert not decide(1, at_c4).malformed and decide(1, at_c4).flags_out is None


def test_four_cluster_example_simulated_on_the_demo_topology():
    topo = load_topology(REPO / "topologies" / "demo.yaml")
    dists = {c: topo.distributors(c) for c in topo.leaves}
    run = simulate(dists, "c1")
    assert sorted(run.copies) == [("c1", "c1.L1", "c2", 0b0001), ("c1", "c1.L3", "c3", 0b0100),
                                  ("c3", "c3.L1", "c4", 0b0101)]
    assert exactly_once(run, topo.leaves)


def test_unbalanced_tree_distributors_and_delivery():
    topo = load_topology(REPO / "topologies" / "unbalanced.yaml")
    assert {c: [d.level for d in topo.distributors(c)] for c in topo.leaves} == {
        "c1": [2, 3], "c2": [1, 2, 3], "c3": [1, 2, 3], "c4": [1, 3], "c5": [1, 3]}
    dists = {c: topo.distributors(c) for c in topo.leaves}
    for origin in topo.leaves:
        run = simulate(dists, origin)
        assert exactly_once(run, topo.leaves), (origin, run.received)
        assert len(run.copies) == len(topo.leaves) - 1


def test_unbalanced_message_from_c2_flag_by_flag():
    topo = load_topology(REPO / "topologies" / "unbalanced.yaml")
    run = simulate({c: topo.distributors(c) for c in topo.leaves}, "c2")
    # c2: L1 -> c3 (001), L2 -> c1 (010), L3 -> c5 (100); c5: L1 -> c4 (101); nothing else copies
    assert sorted(run.copies) == [("c2", "c2.L1", "c3", 0b001), ("c2", "c2.L2", "c1", 0b010),
                                  ("c2", "c2.L3", "c5", 0b100), ("c5", "c5.L1", "c4", 0b101)]


@pytest.mark.parametrize("file", ["demo.yaml", "unbalanced.yaml"])
def test_every_target_assignment_delivers_exactly_once(file):
    """Exhaustive over target switching: each link may point at any leaf of its sibling subtree."""
    topo = load_topology(REPO / "topologies" / file)
    dists = {c: topo.distributors(c) for c in topo.leaves}
    links = topo.all_links()
    for choice in itertools.product(*(d.sibling_leaves for d in links)):
        targets = {d.link_id: t for d, t in zip(links, choice)}
        for origin in topo.leaves:
            run = simulate(dists, origin, choose=lambda d: targets[d.link_id])
            assert exactly_once(run, topo.leaves), (targets, origin, run.received)


def test_skip_reason_names_the_levels_already_done():
    d = decide(3, flags_header(b"5"))
    assert not d.copy and "1, 3" in d.reason and d.reason.startswith("skip")
    assert decide(1, flags_header(b"4")).reason.startswith("copy")


def test_decide_validates_its_arguments():
    with pytest.raises(CopyFlagsError):
        decide(0, None)
    with pytest.raises(CopyFlagsError):
        decide(64, None)
    with pytest.raises(CopyFlagsError, match="on_malformed"):
        decide(1, None, on_malformed="ignore")


# --------------------------------------------------------------------------- header rewriting


def test_rewrite_keeps_other_headers_in_order_and_replaces_in_place():
    headers = [("a", b"1"), (HEADER, b"4"), ("b", None), ("a", b"2")]
    assert rewrite_headers(headers, 5) == [("a", b"1"), (HEADER, b"5"), ("b", None), ("a", b"2")]


def test_rewrite_appends_when_absent():
    assert rewrite_headers(None, 1) == [(HEADER, b"1")]
    assert rewrite_headers([("a", b"x")], 4) == [("a", b"x"), (HEADER, b"4")]
    assert rewrite_headers({"a": b"x"}, 4) == [("a", b"x"), (HEADER, b"4")]


def test_rewrite_collapses_every_instance_into_one():
    headers = [(HEADER, b"4"), ("a", b"x"), (HEADER, b"junk"), (HEADER, None), ("a", b"y")]
    out = rewrite_headers(headers, 0b101)
    assert out == [(HEADER, b"5"), ("a", b"x"), ("a", b"y")]
    assert [k for k, _ in out].count(HEADER) == 1


def test_rewrite_does_not_modify_its_input():
    headers = [(HEADER, b"4")]
    rewrite_headers(headers, 5)
    assert headers == [(HEADER, b"4")]


def test_bytes_header_keys_are_recognised():
    d = decide(1, [(HEADER.encode(), b"1")])
    assert not d.copy
    assert rewrite_headers([(HEADER.encode(), b"4")], 5) == [(HEADER, b"5")]


def test_headers_for_copy():
    d = decide(1, [("trace", b"t"), (HEADER, b"4")])
    assert d.headers_for_copy([("trace", b"t"), (HEADER, b"4")]) == [("trace", b"t"), (HEADER, b"5")]
    with pytest.raises(CopyFlagsError):
        decide(3, flags_header(b"4")).headers_for_copy(flags_header(b"4"))


# --------------------------------------------------------------------------- malformed headers


@pytest.mark.parametrize("headers, raws", [
    ([(HEADER, b"garbage")], (b"garbage",)),
    ([(HEADER, b"")], (b"",)),
    ([(HEADER, None)], (None,)),
    ([(HEADER, b"-4")], (b"-4",)),
    ([(HEADER, b"9223372036854775808")], (b"9223372036854775808",)),
    ([(HEADER, b"1"), (HEADER, b"4")], (b"1", b"4")),            # present twice, different values
    ([(HEADER, b"4"), ("x", b"y"), (HEADER, b"zz")], (b"4", b"zz")),
])
def test_malformed_is_treated_as_fresh_and_kept_for_forensics(headers, raws):
    d = decide(3, headers)
    assert (d.copy, d.malformed, d.flags_in, d.flags_out) == (True, True, 0, 0b100)
    assert d.invalid == raws and "malformed" in d.reason
    out = d.headers_for_copy(headers)
    assert [v for k, v in out if k == HEADER] == [b"4"]
    assert [v for k, v in out if k == INVALID_HEADER] == list(raws)
    assert [kv for kv in out if kv[0] not in (HEADER, INVALID_HEADER)] == \
        [kv for kv in headers if kv[0] != HEADER]
    # every level on the origin cluster reaches the same (fresh) verdict
    assert all(decide(lv, headers).copy and decide(lv, headers).malformed for lv in (1, 2, 63))


@pytest.mark.parametrize("headers, shown", [
    ([(HEADER, b"garbage")], "b'garbage'"),
    ([(HEADER, None)], "None"),
    ([(HEADER, b"1"), (HEADER, b"4")], "(b'1', b'4')"),
    ([(HEADER, b"1"), (HEADER, b"x")], "(b'1', b'x')"),
])
def test_fail_policy_raises_naming_the_value(headers, shown):
    with pytest.raises(MalformedCopyFlags) as info:
        decide(1, headers, on_malformed="fail")
    assert shown in str(info.value)


def test_same_value_twice_is_not_malformed():
    headers = [(HEADER, b"4"), (HEADER, b"4")]
    d = decide(1, headers, on_malformed="fail")
    assert (d.copy, d.malformed, d.flags_out) == (True, False, 0b101)
    assert d.headers_for_copy(headers) == [(HEADER, b"5")]
    assert not decide(3, headers).copy


def test_malformed_origin_still_reaches_every_cluster_exactly_once():
    topo = load_topology(REPO / "topologies" / "unbalanced.yaml")
    dists = {c: topo.distributors(c) for c in topo.leaves}
    malformed_seen = []

    def recording(level, headers):
        d = decide(level, headers)
        malformed_seen.append(d.malformed)
        return d

    for origin in topo.leaves:
        malformed_seen.clear()
        run = simulate(dists, origin, decide=recording, headers=[("app", b"1"), (HEADER, b"not-a-number")])
        assert exactly_once(run, topo.leaves)
        # only the origin's distributors see the bad header; every copy carries a valid one
        assert sum(malformed_seen) == len(dists[origin])


def test_a_copy_of_a_malformed_message_is_never_malformed_again():
    first = decide(1, [(HEADER, b"??")])
    copied = first.headers_for_copy([(HEADER, b"??")])
    assert copied == [(HEADER, b"1"), (INVALID_HEADER, b"??")]
    again = decide(3, copied)
    assert (again.malformed, again.copy) == (False, False)


def test_topology_and_copyflags_agree_on_levels():
    from mirrorflow.topology import LEVEL_MAX, LEVEL_MIN

    assert (LEVEL_MIN, LEVEL_MAX) == (copyflags.LEVEL_MIN, copyflags.LEVEL_MAX)
    topo = Topology.parse({"clusters": {"a": {"bootstrap": "h:1"}, "b": {"bootstrap": "h:2"}},
                           "tree": {"level": 63, "children": ["a", "b"]}, "topics": ["t"]})
    d = topo.distributors("a")[0]
    assert (d.bit, d.mask) == (copyflags.bit(63), copyflags.mask(63))
    assert decide(63, None).flags_out == 2**62 and encode(decide(63, None).flags_out)
