"""Every cluster its own names: the four-cluster tree with three naming patterns, copied in-process.

c1 stores a topic under ``{tenant}-{instance}-{environment}-{topic}``, c2 under
``{tenant}-{environment}-{topic}``, c3 and c4 under the logical name; consumer groups
the same way on c1, under a prefix on c2. Messages produced on every cluster under
that cluster's name reach every cluster exactly once under its own name; nothing
appears under another cluster's name, or under the logical name where a cluster
renames; a topic outside a cluster's pattern is not mirrored from it; the audit
proves every window complete, one tally per logical topic. A group's
position travels to each cluster under the group's name there, exactly.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from mirrorflow.completeness.run import run_audit
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.topology import Topology
from tests.integration.groups import consume_and_commit, offsets_round, read_from_committed
from tests.integration.mirroring import FOUR, assert_exactly_once, clients, converge, topology, traffic

pytestmark = pytest.mark.kafka

NAMES = {
    "c1": {"topics": "{tenant}-{instance}-{environment}-{topic}", "groups": "{tenant}-{instance}-{environment}-{group}",
           "values": {"tenant": "acme", "instance": "main", "environment": "prod"}},
    "c2": {"topics": "{tenant}-{environment}-{topic}", "group_prefix": "acme-prod-",
           "values": {"tenant": "acme", "environment": "prod"}},
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

    # the completeness audit counts each cluster's name as the one logical topic, and proves it complete
    cc = {n: ClusterClient.from_cluster_config(n, topo.cluster(n)) for n in topo.clusters}
    audit = run_audit(cc, lambda t: t == logical, grace_s=0, now_ms=int(time.time() * 1000) + 3_600_000)
    assert audit.ok, audit.summary()
    assert {n: audit.counts[n].read for n in cc} == dict.fromkeys(cc, len(expected))
    assert audit.comparison is not None and audit.comparison.judged >= 4
    assert audit.comparison.complete == audit.comparison.judged
    for cluster, name in physical.items():  # nobody made a topic under another cluster's names
        listed = {t for t in AdminClient(kafka_clusters[cluster].client_config()).list_topics(timeout=10).topics
                  if t.endswith(logical)}
        assert listed == {name, *([stray] if cluster == "c2" else [])}, (cluster, sorted(listed))


def test_a_groups_position_lands_under_its_name_on_each_cluster_and_resumes_there_skipping_and_replaying_nothing(
        kafka_clusters, make_topic):
    logical = f"orders-{uuid.uuid4().hex[:6]}"
    topo = _renamed(kafka_clusters, logical)
    physical = {c: topo.topic_naming(c).render(logical) for c in topo.clusters}
    for cluster, name in physical.items():
        make_topic(cluster, partitions=2, name=name)
    expected = traffic(kafka_clusters, "c1", physical["c1"], 200)
    converge(topo, clients(kafka_clusters, topo))
    group = f"billing-{uuid.uuid4().hex[:4]}"
    on_c1 = topo.group_naming("c1").render(group)
    done = consume_and_commit(kafka_clusters["c1"].bootstrap, physical["c1"], on_c1, 120)

    cc = {n: ClusterClient.from_cluster_config(n, topo.cluster(n)) for n in topo.clusters}
    offsets_round(topo, cc, {group: "c1"})

    for cluster in ("c2", "c3", "c4"):
        name = topo.group_naming(cluster).render(group)
        rest = read_from_committed(kafka_clusters[cluster].bootstrap, physical[cluster], name, 2)
        assert not set(expected) - set(done) - set(rest), f"{cluster}: group {name} skipped messages"
        assert not set(done) & set(rest), f"{cluster}: group {name} replayed messages (one origin: exact)"
    assert topo.group_naming("c2").render(group) == f"acme-prod-{group}"
