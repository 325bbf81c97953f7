"""Verifying a new cluster against its peer: ``compare`` on hand-made identities (no Kafka)."""

from __future__ import annotations

import zlib

from mirrorflow.onboard.verify import PartitionCheck, VerifyReport, compare, summarize

K = "c1:orders:0"  # an origin: cluster:topic:partition


def ids(*offsets: int, crc: int = 7) -> dict[int, int]:
    """Identities of one origin: offset -> crc (the same crc unless a test changes one)."""
    return {o: crc + o for o in offsets}


def chained(crcs: list[int]) -> int:
    out = 0
    for c in crcs:
        out = zlib.crc32(c.to_bytes(4, "big"), out)
    return out


def test_identical_is_ok_and_counts_every_message():
    peer = {K: ids(0, 1, 2), "c2:orders:0": ids(10, 11)}
    check = compare("orders", 0, peer, {k: dict(v) for k, v in peer.items()})
    assert check.ok
    assert (check.topic, check.partition) == ("orders", 0)
    assert check.compared == 5
    assert check.history_only_on_new == 0
    assert (check.missing, check.unexpected, check.checksum_mismatch) == ([], [], [])
    assert check.origins == {"c1:orders:0": [3, chained([7, 8, 9])], "c2:orders:0": [2, chained([17, 18])]}


def test_a_gap_on_new_within_its_reached_range_is_missing():
    check = compare("orders", 0, {K: ids(0, 1, 2, 3)}, {K: ids(0, 2, 3)})
    assert not check.ok
    assert check.missing == [f"{K}@1"]
    assert check.unexpected == [] and check.checksum_mismatch == []
    assert check.compared == 3


def test_new_behind_the_peer_is_in_flight_not_missing():
    check = compare("orders", 0, {K: ids(0, 1, 2, 3, 4)}, {K: ids(0, 1)})
    assert check.ok
    assert check.missing == []
    assert check.compared == 2
    assert check.origins[K] == [2, chained([7, 8])]


def test_an_origin_not_reached_at_all_on_new_is_in_flight():
    check = compare("orders", 0, {K: ids(0, 1)}, {})
    assert check.ok
    assert check.compared == 0
    assert check.origins == {K: [0, 0]}


def test_an_extra_identity_on_new_within_the_peer_range_is_unexpected():
    check = compare("orders", 0, {K: ids(0, 2, 3)}, {K: ids(0, 1, 2, 3)})
    assert not check.ok
    assert check.unexpected == [f"{K}@1"]
    assert check.missing == []
    assert check.compared == 3


def test_new_ahead_of_the_peer_is_not_unexpected():
    check = compare("orders", 0, {K: ids(0, 1)}, {K: ids(0, 1, 2, 3)})
    assert check.ok
    assert check.unexpected == []
    assert check.compared == 2


def test_a_different_crc_is_a_checksum_mismatch():
    new = ids(0, 1, 2)
    new[1] = 999
    check = compare("orders", 0, {K: ids(0, 1, 2)}, {K: new})
    assert not check.ok
    assert check.checksum_mismatch == [f"{K} over 3 messages"]
    assert check.missing == [] and check.unexpected == []
    assert check.origins[K] == [3, chained([7, 999, 9])]


def test_a_crc_difference_beyond_the_common_part_is_not_compared():
    peer = ids(0, 1, 2)
    peer[2] = 12345  # new has not reached offset 2 yet
    check = compare("orders", 0, {K: peer}, {K: ids(0, 1)})
    assert check.ok
    assert check.compared == 2


def test_history_only_on_new_is_counted_not_an_error():
    check = compare("orders", 0, {K: ids(5, 6)}, {K: ids(2, 3, 4, 5, 6)})
    assert check.ok
    assert check.history_only_on_new == 3
    assert check.compared == 2
    assert check.unexpected == [] and check.missing == []


def test_origins_only_on_new_are_ignored():
    new = {K: ids(0, 1), "c4:orders:0": ids(0, 1, 2), "c9:orders:3": ids(0)}
    check = compare("orders", 0, {K: ids(0, 1)}, new)
    assert check.ok
    assert check.compared == 2
    assert check.history_only_on_new == 0
    assert list(check.origins) == [K]


def test_every_kind_of_problem_is_reported_per_origin():
    peer = {"a:t:0": ids(0, 1, 2), "b:t:0": ids(0, 2, 3)}
    new = {"a:t:0": ids(0, 2), "b:t:0": {0: 7, 1: 8, 2: 0, 3: 10}}
    check = compare("t", 1, peer, new)
    assert check.missing == ["a:t:0@1"]
    assert check.unexpected == ["b:t:0@1"]
    assert check.checksum_mismatch == ["b:t:0 over 3 messages"]
    assert check.compared == 5


def test_report_problems_and_summary():
    bad = PartitionCheck("orders", 2, compared=4, history_only_on_new=1,
                         missing=[f"{K}@{o}" for o in range(7)], duplicates=[f"{K}@9"])
    good = PartitionCheck("orders", 0, compared=10)
    report = VerifyReport("c3", "c4", [good, bad])
    assert not report.ok
    assert report.problems() == [
        f"orders[2]: 1 duplicates on c4: {K}@9",
        f"orders[2]: 7 missing on c4: {K}@0, {K}@1, {K}@2, {K}@3, {K}@4 and 2 more",
    ]
    data = report.to_dict()
    assert (data["peer"], data["new"], data["ok"]) == ("c3", "c4", False)
    assert [p["partition"] for p in data["partitions"]] == [0, 2]
    assert summarize(report.partitions) == {"partitions": 2, "compared": 14, "history_only_on_new": 1,
                                            "failed_partitions": 1}
    assert VerifyReport("c3", "c4", [good]).ok
