"""Every cluster its own topic names: the four-cluster tree with three naming patterns, copied in-process.

c1 stores a topic under ``{tenant}-{instance}-{environment}-{topic}``, c2 under
``{tenant}-{environment}-{topic}``, c3 and c4 under the logical name. Messages
produced on every cluster under that cluster's name reach every cluster exactly once
under its own name; nothing appears under another cluster's name, or under the
logical name where a cluster renames; a topic outside a cluster's pattern is not
mirrored from it.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient

from mirrorflow.topology import Topology
from tests.integration.mirroring import FOUR, assert_exactly_once, clients, converge, topology, traffic

pytestmark = pytest.mark.kafka

NAMES = {
    "c1": {"topics": "{tenant}-{instance}-{environment}-{topic}",
           "values": {"tenant": "acme", "instance": "main", "environment": "prod"}},
    "c2": {"topics": "{tenant}-{environment}-{topic}", "values": {"tenant": "acme", "environment": "prod"}},
}


def _renamed(kafka_clusters, logical: str) -> Topology:
    data = topology(kafka_clusters, FOUR, [logical]).to_dict()
    for cluster, names in NAMES.items():
        data["clusters"][cluster]["names"] = names
    return Topology.parse(data)


def test_three_patterns_on_the_four_cluster_tree_each_cluster_holding_every_message_once_under_its_names(
        kafka_clusters, make_topic):
    logical = f"orders-{uuid.uuid4().hex[:6]}"
    topo = _renamed(kafka_clusters, logical)
    physical = {c: topo.topic_naming(c).render(logical) for c in topo.clusters}
    assert physical == {"c1": f"acme-main-prod-{logical}", "c2": f"acme-prod-{logical}", "c3": logical,
                        "c4": logical}
    for cluster, name in physical.items():
        make_topic(cluster, partitions=2, name=name)
    # On c2, a topic under the logical name is outside its pattern: an application's own, never mirrored.
    stray = make_topic("c2", partitions=1, name=logical)
    strays = traffic(kafka_clusters, "c2", stray, 5)

    expected = [m for c, name in physical.items() for m in traffic(kafka_clusters, c, name, 40)]
    converge(topo, clients(kafka_clusters, topo))

    for cluster, name in physical.items():
        assert_exactly_once(kafka_clusters, [cluster], name, expected)
    assert_exactly_once(kafka_clusters, ["c2"], stray, strays)  # untouched: only its own five
    for cluster, name in physical.items():  # nobody made a topic under another cluster's names
        listed = {t for t in AdminClient(kafka_clusters[cluster].client_config()).list_topics(timeout=10).topics
                  if t.endswith(logical)}
        assert listed == {name, *([stray] if cluster == "c2" else [])}, (cluster, sorted(listed))
