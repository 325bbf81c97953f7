"""The level copy job (driver planning, Spark executors) across whole trees of real clusters."""

from __future__ import annotations

import json

import pytest

from tests.integration.mirroring import (
    FOUR,
    UNBALANCED,
    assert_exactly_once,
    clients,
    converge,
    topic_everywhere,
    topology,
    traffic,
)
from tests.integration.progress_lines import every_update, progress_lines

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_four_cluster_tree_converges_exactly_once(kafka_clusters, make_topic, spark, caplog, monkeypatch):
    topic = make_topic("c1", partitions=3)
    topo = topology(kafka_clusters, FOUR, [topic])
    for c in ("c2", "c3", "c4"):
        make_topic(c, partitions=3, name=topic)
    expected = []
    for c in ("c1", "c2", "c3", "c4"):
        expected += traffic(kafka_clusters, c, topic, 60)
    every_update(monkeypatch, caplog)
    opened = admin_clients_opened(monkeypatch)
    results = converge(topo, clients(kafka_clusters, topo), spark)
    table = assert_exactly_once(kafka_clusters, topo.leaves, topic, expected)
    assert table == {c: 240 for c in topo.leaves}
    # each cluster's 60 reach 3 others: 180 copies per origin
    assert sum(r.copied for r in results) == 4 * 60 * 3

    # one audit line per partition copied, with everything an operator needs to reconcile
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mirrorflow.audit"]
    copies = [line for line in lines if line["event"] == "copy"]
    assert sum(line["copied"] for line in copies) == 4 * 60 * 3
    first = next(line for line in copies if line["link"]["id"] == "c1.L1" and line["copied"])
    assert first["link"] == {"id": "c1.L1", "source": "c1", "level": 1, "target": "c2"}
    assert first["run_id"] == results[0].run_id and first["topic"] == topic
    start, end = first["source_offsets"]
    assert end - start >= first["copied"] + first["skipped"]  # transaction markers take offsets too
    assert first["target_offsets"][0] is not None and first["checksum"].startswith("crc32:")
    assert {"bytes", "duration_s", "partition", "error", "at"} <= set(first)
    assert [line["run_id"] for line in lines if line["event"] == "copy_run"] == [r.run_id for r in results]
    # on Spark, progress counts finished Spark tasks (test_spark_connect.py checks Spark's reports); records at the end
    final = progress_lines(caplog, "level", results[0].run_id)[-1]
    assert final["final"] and final["measured"] == "spark_tasks"
    assert final["tasks_done"] == final["tasks"] == results[0].tasks > 0
    assert final["records"] == final["planned"] == sum(link.planned_records for link in results[0].links) > 0
    # each link's plan says how long each of its steps took; the target's copies are looked for where a
    # partition with records has no checkpoint (every link's first run here)
    steps = [link.plan_steps for r in results for link in r.links]
    always = {"target_shapes", "source_topics", "checkpoints", "source_offsets", "topic_ids", "offsets_retention",
              "reads"}
    assert steps and all(always <= set(s) <= always | {"copies_on_target"}
                         and all(v >= 0 for v in s.values()) for s in steps), steps
    assert all("copies_on_target" in link.plan_steps for link in results[0].links), results[0].links
    # a plan asks every cluster through one admin client (mirrorflow.kafka.shared), not one per question
    clusters_per_run = [len({c for link in r.links for c in (link.source, link.target)}) for r in results]
    assert 0 < len(opened) <= sum(clusters_per_run), (opened, clusters_per_run)


def admin_clients_opened(monkeypatch) -> list[str]:
    """The client ids of the admin clients mirrorflow's Kafka layer opens from now on (real clients, counted):
    the shared ones and the probes' (a plan's first client of a cluster, which it then shares)."""
    import mirrorflow.kafka.admin as admin
    import mirrorflow.kafka.shared as shared

    opened: list[str] = []

    class Counted(shared.AdminClient):
        def __init__(self, conf):
            opened.append(conf.get("client.id", "?"))
            super().__init__(conf)

    monkeypatch.setattr(shared, "AdminClient", Counted)
    monkeypatch.setattr(admin, "AdminClient", Counted)
    return opened


def test_unbalanced_five_cluster_tree_converges_exactly_once(kafka_clusters, fifth_cluster, make_topic, spark):
    names = ("c1", "c2", "c3", "c4", "c5")
    topic = topic_everywhere(make_topic, names)
    topo = topology(kafka_clusters, UNBALANCED, [topic], names=names)
    assert topo.levels == [1, 2, 3]
    expected = []
    for c in names:
        expected += traffic(kafka_clusters, c, topic, 30)
    results = converge(topo, clients(kafka_clusters, topo), spark)
    assert assert_exactly_once(kafka_clusters, names, topic, expected) == {c: 150 for c in names}
    assert sum(r.copied for r in results) == 5 * 30 * 4
