"""Offset distribution on real clusters: the timestamp precision (Axual's rule), and what a failover plan costs.

The exact precision, active-active topics, failover and idempotence are tested
through the DAGs themselves in tests/dags/test_failover_dag.py; this covers the
timestamp rule's bound (nothing skipped, replay within the margin) and the
connections a failover's plan opens on its target.
"""

from __future__ import annotations

from confluent_kafka import Consumer

from mirrorflow.kafka import ranges
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.offsets.failover import distributed_positions, plan_failover
from tests.integration.groups import consume_and_commit, offsets_round, read_from_committed
from tests.integration.kafka_io import read_all
from tests.integration.mirroring import FOUR, clients, converge, topic_everywhere, topology, traffic

PAIR = "\n  level: 1\n  children: [c1, c2]\n"


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


def test_a_failover_plan_reads_its_target_through_one_consumer_per_topic(kafka_clusters, make_topic, monkeypatch):
    """Its scans of every partition (the cut, the replay, what is missing) share one reading consumer.

    A consumer per scan paid its connections, API versions and metadata again for
    every partition, twice or three times: 22 s of a 100 ms-away target's failover.
    """
    partitions = 8
    topic = topic_everywhere(make_topic, ("c1", "c2"), partitions=partitions)
    topo = topology(kafka_clusters, PAIR, [topic], names=("c1", "c2"))
    traffic(kafka_clusters, "c1", topic, 200)
    converge(topo, clients(kafka_clusters, topo))
    consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "g-plan", 200)
    cc = {n: ClusterClient(n, s) for n, s in clients(kafka_clusters, topo).items()}
    offsets_round(topo, cc, {"g-plan": "c1"})
    positions = distributed_positions(cc["c2"], "c1", ["g-plan"])
    assert len(positions) == partitions

    made: list[str] = []

    class Counted(Consumer):  # the real consumer, counted where range readers make theirs
        def __init__(self, config):
            made.append(config["group.id"])
            super().__init__(config)

    monkeypatch.setattr(ranges, "Consumer", Counted)
    plan = plan_failover(cc["c2"], positions, source="c1", mode="planned", precision="exact", margin_s=60.0,
                         groups=["g-plan"])
    assert [r.expected_replay for r in plan.rows] == [0] * partitions and not plan.missing
    assert len(made) == 1, f"{len(made)} reading consumers for a plan of {partitions} partitions of one topic"
