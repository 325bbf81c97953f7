"""Switching a link's target within its subtree while traffic flows: no loss, no duplicate."""

from __future__ import annotations

import pytest

from mirrorflow.actions.switch import SwitchError, switch_target
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.topology import Topology
from mirrorflow.topology.routes import effective_links
from tests.integration.mirroring import (
    FOUR,
    Traffic,
    assert_exactly_once,
    clients,
    converge,
    run_level,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _clients(kafka_clusters, names=("c1", "c2", "c3", "c4")):
    return {n: ClusterClient(n, {"bootstrap.servers": kafka_clusters[n].bootstrap}) for n in names}


def test_switch_while_traffic_flows_loses_and_duplicates_nothing(kafka_clusters, make_topic, spark):
    """c3 and c4 name topics each their own way: the cut read on c3 lands on c4 under c4's name."""
    topic = topic_everywhere(make_topic, names=("c1", "c2"))
    on = {"c1": topic, "c2": topic, "c3": f"acme-prod-{topic}", "c4": f"acme.{topic}"}
    for cluster in ("c3", "c4"):
        make_topic(cluster, partitions=2, name=on[cluster])
    data = topology(kafka_clusters, FOUR, [topic]).to_dict()
    data["clusters"]["c3"]["names"] = {"topic_prefix": "acme-prod-"}
    data["clusters"]["c4"]["names"] = {"topics": "{tenant}.{topic}", "values": {"tenant": "acme"}}
    topo = Topology.parse(data)
    settings = clients(kafka_clusters, topo)
    expected = traffic(kafka_clusters, "c1", topic, 50) + traffic(kafka_clusters, "c3", on["c3"], 50)
    targets: dict[str, str] = {}

    with Traffic(kafka_clusters, topic, ["c1", "c2"]) as flowing:
        flowing.wait_for(100)
        for level in topo.levels:  # some of c1's data reaches c3 (and c4 through c3) before the switch
            assert run_level(topo, level, settings, spark).ok
        flowing.wait_for(len(flowing.ids) + 100)
        # c1.L3 copied to c3 (its default): it moves to c4, the other leaf of the sibling subtree
        link = next(l for l in effective_links(topo, 3, targets) if l.link_id == "c1.L3")
        named = {n: ClusterClient.from_cluster_config(n, topo.cluster(n)) for n in topo.clusters}
        report = switch_target(link, "c4", named, list(topo.topics))
        targets["c1.L3"] = "c4"
        assert report.mode == "checkpoint" and report.attempts >= 1
        assert any(cut for cuts in report.cuts.values() for cut in cuts.values())  # something was copied before
        # a stale run that still aims at c3 copies nothing for the link and says why
        stale = run_level(topo, 3, settings, spark)
        assert any("switched" in e.error and e.link == "c1.L3" for e in stale.errors), stale.summary()["errors"]
        for level in topo.levels:
            run_level(topo, level, settings, spark, targets)
        flowing.wait_for(len(flowing.ids) + 100)
    expected += flowing.stop()

    converge(topo, settings, spark, targets)
    for cluster in topo.leaves:
        assert_exactly_once(kafka_clusters, [cluster], on[cluster], expected)


def test_switch_to_a_leaf_outside_the_subtree_is_refused(kafka_clusters, make_topic):
    topic = make_topic("c1")
    topo = topology(kafka_clusters, FOUR, [topic])
    link = next(l for l in effective_links(topo, 3) if l.link_id == "c1.L3")
    with pytest.raises(SwitchError, match=r"'c2' is not a leaf of the level-3 sibling subtree of c1; allowed targets: c3, c4"):
        switch_target(link, "c2", _clients(kafka_clusters), [topic])


def test_switch_away_from_an_unreachable_target_needs_force(kafka_clusters, make_topic):
    topic = make_topic("c1")
    topo = topology(kafka_clusters, FOUR, [topic])
    link = next(l for l in effective_links(topo, 3) if l.link_id == "c1.L3")
    cl = _clients(kafka_clusters)
    cl["c3"] = ClusterClient("c3", {"bootstrap.servers": "127.0.0.1:9", "socket.connection.setup.timeout.ms": 2000})
    with pytest.raises(SwitchError, match="c3 is unreachable"):
        switch_target(link, "c4", cl, [topic])
