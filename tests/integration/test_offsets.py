"""Offset distribution on real clusters with the timestamp precision (Axual's rule).

The exact precision, active-active topics, failover and idempotence are tested
through the DAGs themselves in tests/dags/test_failover_dag.py; this covers the
timestamp rule's bound: nothing skipped, replay within the margin.
"""

from __future__ import annotations

from mirrorflow.kafka.config import ClusterClient
from tests.integration.groups import consume_and_commit, offsets_round, read_from_committed
from tests.integration.kafka_io import read_all
from tests.integration.mirroring import FOUR, clients, converge, topic_everywhere, topology, traffic


def _clients(kafka_clusters, topo):
    return {n: ClusterClient(n, s) for n, s in clients(kafka_clusters, topo).items()}


def test_timestamp_precision_replays_only_within_the_margin(kafka_clusters, make_topic):
    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic])
    expected = traffic(kafka_clusters, "c1", topic, 400)  # CreateTimes 1 ms apart per message
    converge(topo, clients(kafka_clusters, topo))
    done = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "g-ts", 150)
    cc = _clients(kafka_clusters, topo)

    offsets_round(topo, cc, {"g-ts": "c1"}, precision=("timestamp", 0.05))  # 50 ms margin

    rest = read_from_committed(kafka_clusters["c4"].bootstrap, topic, "g-ts", 2)
    assert not set(expected) - set(done) - set(rest), "the timestamp rule skipped messages"
    replayed = set(done) & set(rest)
    assert replayed, "a 50 ms margin over 1 ms-spaced messages must replay some"
    # message i was produced with CreateTime base + (i % 1000) ms, one origin: replay bounded by the margin,
    # behind the last message the group consumed of the same partition (a group reads its partitions unevenly)
    seq = {v: int(v.split("|")[2]) for v in expected}
    partition = {r.value.decode(): r.partition for r in read_all(kafka_clusters["c1"].bootstrap, topic, 2)}
    by_partition_last = {p: max(seq[v] for v in done if partition[v] == p) for p in {partition[v] for v in done}}
    assert all(by_partition_last[partition[v]] - seq[v] <= 50 + 5 for v in replayed), sorted(
        (partition[v], seq[v]) for v in replayed)[:10]
