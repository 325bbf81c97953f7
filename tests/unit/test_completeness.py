"""The completeness audit's pure parts: tallies (mirrorflow.completeness.tally) and their comparison (compare)."""

from __future__ import annotations

import random

import pytest

from mirrorflow.completeness.compare import Difference, compare, final
from mirrorflow.completeness.tally import Tallies, Tally, WindowKey, identity_hash, window_of
from mirrorflow.provenance import Origin, origin_of

W = 600  # seconds
T0 = 1_800_000_000_000  # a window start (ms), divisible by W * 1000


def _messages(cluster, n, topic="t", partitions=3):
    return [(Origin(cluster, topic, i % partitions, i // partitions), T0 + i * 1000) for i in range(n)]


def _tallies(messages):
    t = Tallies(W)
    for origin, ts in messages:
        t.add(origin, ts)
    return t


def test_windows_start_on_their_boundary_and_keys_round_trip():
    assert window_of(T0, W) == T0 and window_of(T0 + W * 1000 - 1, W) == T0 and window_of(T0 + W * 1000, W) != T0
    key = WindowKey("orders.v1|x", "c1", T0)  # a topic may not hold '|', but the split is from the right anyway
    assert WindowKey.decode(key.encode()) == key


def test_the_same_messages_in_any_order_and_any_split_give_the_same_tallies():
    messages = _messages("c1", 500)
    shuffled = messages[:]
    random.Random(7).shuffle(shuffled)
    whole = _tallies(messages)
    halves = _tallies(shuffled[:200]).merge(_tallies(shuffled[200:]))
    assert whole.cells == halves.cells


def test_a_missing_a_duplicated_and_a_different_message_each_change_the_tally():
    messages = _messages("c1", 50)
    reference = _tallies(messages).cells
    missing = _tallies(messages[1:]).cells
    twice = _tallies(messages + messages[:1]).cells
    other = _tallies(messages[1:] + [(Origin("c1", "t", 0, 999), messages[0][1])]).cells
    for changed in (missing, twice, other):
        assert changed != reference
    assert sum(t.count for t in other.values()) == sum(t.count for t in reference.values())


def test_a_record_without_an_origin_is_its_own_origin():
    assert origin_of(None, "c2", "t", 3, 17) == Origin("c2", "t", 3, 17)
    stamped = [("mirror.origin", b"c1:t:3:5")]
    assert origin_of(stamped, "c2", "t", 3, 17) == Origin("c1", "t", 3, 5)
    forwarded = [("mirror.origin", b"c1:t-raw:3:5")]  # derived by an application from a copy in another topic
    assert origin_of(forwarded, "c2", "t", 3, 17) == Origin("c2", "t", 3, 17)
    assert identity_hash(Origin("c1", "t", 0, 5)) == identity_hash(Origin("c1", "t", 0, 5))


def test_tally_sums_wrap_and_round_trip():
    t = Tally()
    t.add((1 << 64) - 1)
    t.add(2)
    assert t == Tally(2, 1) and Tally.from_dict(t.to_dict()) == t
    with pytest.raises(ValueError, match="cannot be added"):
        Tallies(600).merge(Tallies(60))


NOW = T0 + 10 * W * 1000


def test_equal_clusters_are_complete_and_a_young_window_waits_for_its_grace():
    messages = _messages("c1", 30)
    tallies = {"c1": _tallies(messages), "c2": _tallies(messages), "c3": _tallies(messages)}
    result = compare(tallies, {"t": ["c1", "c2", "c3"]}, now_ms=NOW, grace_s=60)
    assert result.ok and result.judged == result.complete == 1
    assert not final(T0, W, T0 + W * 1000 + 59_000, 60) and final(T0, W, T0 + W * 1000 + 60_000, 60)
    waiting = compare(tallies, {"t": ["c1", "c2", "c3"]}, now_ms=T0 + W * 1000, grace_s=60)
    assert waiting.judged == 0 and waiting.pending == 1


def test_a_cluster_short_of_messages_or_holding_one_twice_is_named_against_the_origin():
    messages = _messages("c1", 30)
    swapped = messages[1:] + [(Origin("c1", "t", 0, 999), messages[0][1])]  # as many, one of them another
    tallies = {"c1": _tallies(messages), "c2": _tallies(messages[:-2]), "c3": _tallies(messages + messages[:1]),
               "c4": Tallies(W), "c5": _tallies(swapped)}
    result = compare(tallies, {"t": ["c1", "c2", "c3", "c4", "c5"]}, now_ms=NOW, grace_s=0)
    assert not result.ok and result.judged == 1 and result.complete == 0
    assert sorted(result.differences) == [Difference("t", T0, "c1", "c2", 30, 28),
                                          Difference("t", T0, "c1", "c3", 30, 31),
                                          Difference("t", T0, "c1", "c4", 30, 0),
                                          Difference("t", T0, "c1", "c5", 30, 30)]


def test_windows_before_a_horizon_are_not_compared_and_an_unaudited_origin_is_no_reference():
    messages = _messages("c1", 30)
    tallies = {"c1": _tallies(messages), "c2": _tallies(messages[:-2])}
    later = T0 + W * 1000
    assert compare(tallies, {"t": ["c1", "c2"]}, now_ms=NOW, grace_s=0, horizons={("c2", "t"): later}).ok
    origin_late = compare(tallies, {"t": ["c1", "c2"]}, now_ms=NOW, grace_s=0, horizons={("c1", "t"): later})
    assert origin_late.ok and origin_late.before_horizon == 1
    without_origin = compare({"c2": _tallies(messages)}, {"t": ["c1", "c2"]}, now_ms=NOW, grace_s=0)
    assert without_origin.judged == 0 and without_origin.no_reference == 1


def _topology(audit=None):
    from mirrorflow.topology import Topology

    data = {"clusters": {"c1": {"bootstrap": "127.0.0.1:1"}, "c2": {"bootstrap": "127.0.0.1:2"}},
            "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": ["orders"]}
    if audit is not None:
        data["audit"] = audit
    return Topology.parse(data)


def test_the_audit_key_has_defaults_and_survives_a_round_trip():
    from mirrorflow.topology import Topology

    audit = _topology().audit
    assert (audit.schedule, audit.window_minutes, audit.grace_minutes) == ("10m", 10, 15)
    topo = _topology({"schedule": "5m", "window_minutes": 60, "grace_minutes": 0})
    assert Topology.parse(topo.to_dict()).audit == topo.audit


@pytest.mark.parametrize("audit, path", [
    ({"window_minutes": 0}, "audit.window_minutes"),
    ({"grace_minutes": -1}, "audit.grace_minutes"),
    ({"schedule": "sometimes"}, "audit.schedule"),
    ({"windows": 10}, "audit.windows"),
])
def test_a_bad_audit_setting_is_refused_naming_its_key(audit, path):
    from mirrorflow.errors import TopologyError

    with pytest.raises(TopologyError, match=path.replace(".", r"\.")):
        _topology(audit)
