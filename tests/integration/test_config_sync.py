"""Topic configs follow one owner on real brokers: the policies that spare a follower's own values.

The default policy (the owner's value wins) is proven through the level DAGs on the
four-cluster tree (tests/dags/test_level_dags.py). Here the shaping step a level run
starts with, ``sync_topic_shapes`` with the owners' side, runs round after round on
three real clusters (c1 the owner, c2 and c3 followers, each the other's link source),
to show what ``keep_target`` and ``report_only`` keep, and that nothing flips back.
"""

from __future__ import annotations

import json
import logging
import re

import pytest

from mirrorflow.cluster_sync import ConfigOwners, ConfigOwnership, sync_topic_shapes, with_headroom
from mirrorflow.journal import JOURNAL_LOGGER
from mirrorflow.kafka import describe_topics
from mirrorflow.topology import Topology
from tests.integration.topic_configs import alter, client_of, explicit_configs, wait_until

pytestmark = pytest.mark.kafka

RET, SEG, MAX = "retention.ms", "segment.ms", "max.message.bytes"
LIMIT = str(with_headroom(1048588))  # the owner's broker default, with room for the copies' headers


def journal_lines(caplog, *events: str) -> list[dict]:
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == JOURNAL_LOGGER]
    return [line for line in lines if line["event"] in events]


def travelling(cluster, topic: str) -> dict[str, str]:
    return {k: v for k, v in explicit_configs(cluster, topic).items() if k in (RET, SEG, MAX, "cleanup.policy")}


def holds(cluster, topic: str, expected: dict[str, str]) -> bool:
    """Whether ``cluster``'s topic has ``expected`` travelling configs, given a moment: a broker answers a
    describe from its metadata image, which applies an acknowledged change a few milliseconds later."""
    wait_until(lambda: travelling(cluster, topic) == expected, f"{topic} on {cluster.name} to hold {expected}", 5)
    return True


@pytest.mark.parametrize("policy", ["keep_target", "report_only"])
def test_a_local_value_is_spared_while_the_owners_changes_still_arrive_and_nothing_flips_back(
        kafka_clusters, make_topic, unique_topic, caplog, policy):
    caplog.set_level(logging.INFO)
    c1, c2, c3 = (kafka_clusters[n] for n in ("c1", "c2", "c3"))
    topic = make_topic(c1, config={RET: "3600000", SEG: "600000"}, name=unique_topic)
    make_topic(c3, config={RET: "60000"}, name=topic)  # c3 had its own value before mirroring began
    selector = Topology.parse({"clusters": {n: {"bootstrap": kafka_clusters[n].bootstrap} for n in ("c1", "c2")},
                               "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": [re.escape(topic)]})

    def shape(source, target):
        owners = ConfigOwners(ConfigOwnership("c1", on_local_change=policy),  # type: ignore[arg-type]
                              {"c1": client_of(c1)})
        result = sync_topic_shapes(client_of(source), client_of(target), selector, owners=owners)
        assert result.ok, (result.failed, result.align_failed)
        return result

    # c2 is created from c3 (its link's source) with the owner's configs, and remembers them
    assert [c.topic for c in shape(c3, c2).created] == [topic]
    owner = {RET: "3600000", SEG: "600000", MAX: LIMIT}
    assert travelling(c2, topic) == owner
    # c3's topic predates any record: its first look reports and changes nothing
    shape(c2, c3)
    assert holds(c3, topic, {RET: "60000"})
    # from then on its value is its own, spared; the keys it lacked arrive
    shape(c2, c3)
    assert holds(c3, topic, {**owner, RET: "60000"})
    # c2 changes retention locally; the owner changes segment.ms
    alter(c2, topic, retention_ms="5000")
    alter(c1, topic, segment_ms="300000")
    for _ in range(2):  # rounds, each cluster the other's source: no flip-flop, the owner never touched
        shape(c3, c2)
        shape(c2, c3)
        assert holds(c2, topic, {**owner, SEG: "300000", RET: "5000"})
        assert holds(c3, topic, {**owner, SEG: "300000", RET: "60000"})
        assert holds(c1, topic, {RET: "3600000", SEG: "300000"})

    aligned = journal_lines(caplog, "topic_config_align")
    assert [(a["cluster"], a["owner"], a["changes"]) for a in aligned] == [
        ("c3", "c1", [{"key": MAX, "old": None, "new": LIMIT, "why": "unset"},
                      {"key": SEG, "old": None, "new": "600000", "why": "unset"}]),
        ("c2", "c1", [{"key": SEG, "old": "600000", "new": "300000", "why": "owner_changed"}]),
        ("c3", "c1", [{"key": SEG, "old": "600000", "new": "300000", "why": "owner_changed"}]),
    ]
    spared = [(s["event"], s["cluster"], s["key"], s["value"], s["why"])
              for s in journal_lines(caplog, "topic_config_kept", "topic_config_drift")]
    first_look = [("topic_config_drift", "c3", key, value, "first_look")
                  for key, value in ((MAX, None), (RET, "60000"), (SEG, None))]
    if policy == "keep_target":  # once each
        assert spared == [*first_look, ("topic_config_kept", "c2", RET, "5000", "local_kept")]
    else:
        assert spared == [*first_look, ("topic_config_drift", "c2", RET, "5000", "local_reported")]
    reported = [r for r in caplog.records if r.levelno == logging.WARNING and "report_only" in r.getMessage()]
    assert (len(reported) > 2) == (policy == "report_only")  # report_only says so every run; keep_target once


def test_an_owner_out_of_reach_leaves_the_configs_as_they_are_and_the_shaping_goes_on(
        kafka_clusters, make_topic, unique_topic, caplog):
    c1, c2 = kafka_clusters["c1"], kafka_clusters["c2"]
    topic = make_topic(c1, config={RET: "3600000"}, name=unique_topic)
    make_topic(c2, config={RET: "5000"}, name=topic)
    selector = Topology.parse({"clusters": {n: {"bootstrap": kafka_clusters[n].bootstrap} for n in ("c1", "c2")},
                               "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": [re.escape(topic)]})
    owners = ConfigOwners(ConfigOwnership("c4"), {}, unread={"c4": "cluster c4 (127.0.0.1:1) is unreachable"})
    result = sync_topic_shapes(client_of(c1), client_of(c2), selector, owners=owners)
    assert result.ok and not result.aligned and travelling(c2, topic) == {RET: "5000"}
    assert "topic configs owned by c4 are not synced in this run" in caplog.text
    assert "127.0.0.1:1) is unreachable" in caplog.text


DAYS_90, DAY, WEEK = "7776000000", "86400000", "604800000"


def test_a_followers_own_longer_retention_is_declined_every_run_until_the_topology_allows_it(
        kafka_clusters, make_topic, unique_topic, caplog):
    """The default policy (overwrite) with a follower that keeps a topic 90 days, set there only."""
    c1, c2 = kafka_clusters["c1"], kafka_clusters["c2"]
    topic = make_topic(c1, name=unique_topic)  # the owner leaves retention to its broker: 7 days
    make_topic(c2, config={RET: DAYS_90, MAX: LIMIT}, name=topic)
    selector = Topology.parse({"clusters": {n: {"bootstrap": kafka_clusters[n].bootstrap} for n in ("c1", "c2")},
                               "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": [re.escape(topic)]})

    def shape(**rules):
        owners = ConfigOwners(ConfigOwnership("c1", **rules), {"c1": client_of(c1)})
        result = sync_topic_shapes(client_of(c1), client_of(c2), selector, owners=owners)
        assert result.ok, (result.failed, result.align_failed)
        return result

    # the broker's default behind the follower's own value is read from its brokers (log.retention.hours)
    assert describe_topics(client_of(c2), [topic])[topic].defaults == {RET: WEEK, "retention.bytes": "-1",
                                                                       "cleanup.policy": "delete"}
    assert shape().plan.verdicts[0].keys[0].why == "first_look"
    for _ in range(2):
        caplog.clear()
        declined = shape().plan.declined
        assert [(d.cluster, d.subject, d.action, d.allow) for d in declined] == [
            ("c2", f"{topic} {RET}", f"remove {RET}", f"topic_configs.allow_keeping_less: [{RET}]")]
        assert holds(c2, topic, {RET: DAYS_90, MAX: LIMIT})
        assert "would make c2 keep less data: declined" in caplog.text  # a warning every run
    assert not journal_lines(caplog, "topic_config_declined")  # audited once, in the first of them
    shape(allow_keeping_less=frozenset({RET}))
    assert holds(c2, topic, {MAX: LIMIT})


def test_an_owner_that_lowers_its_retention_brings_every_follower_that_held_the_old_value_in_one_round(
        kafka_clusters, make_topic, unique_topic):
    c1, c2, c3 = (kafka_clusters[n] for n in ("c1", "c2", "c3"))
    topic = make_topic(c1, config={RET: DAYS_90}, name=unique_topic)
    selector = Topology.parse({"clusters": {n: {"bootstrap": kafka_clusters[n].bootstrap} for n in ("c1", "c2")},
                               "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": [re.escape(topic)]})

    def round_():
        for target in (c2, c3):
            owners = ConfigOwners(ConfigOwnership("c1"), {"c1": client_of(c1)})
            assert sync_topic_shapes(client_of(c1), client_of(target), selector, owners=owners).ok

    round_()  # created on both with the owner's 90 days, and remembered
    alter(c1, topic, retention_ms=DAY)
    round_()
    for follower in (c2, c3):
        assert holds(follower, topic, {RET: DAY, MAX: LIMIT})
