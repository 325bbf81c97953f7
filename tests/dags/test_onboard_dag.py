"""mirror_onboard_cluster under dag.test(): a fourth cluster joins three with traffic flowing, and a clash."""

from __future__ import annotations

import dataclasses
import json

import pytest
from confluent_kafka.admin import AdminClient

from mirrorflow.offsets.distribute import distribute
from mirrorflow.offsets.sync import publish_owned
from mirrorflow.offsets.topic import ensure_topic
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.topology.changes import apply_changes
from mirrorflow_airflow.factories.onboard import build_onboard_dag
from mirrorflow_airflow.state import CHANGES_VARIABLE, ONBOARDING_VARIABLE, OWNERS_VARIABLE, TARGETS_VARIABLE
from tests.dags.test_level_dags import xcom
from tests.integration.groups import consume_and_commit, read_from_committed
from tests.integration.mirroring import (LevelRuns, Traffic, assert_exactly_once, clients, converge,
                                         partitions_of, topic_everywhere, topology, traffic)

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

THREE = """
  level: 3
  children:
    - {level: 1, children: [c1, c2]}
    - c3
"""
def form(kafka_clusters, **extra):
    return {"cluster": "c4", "bootstrap": kafka_clusters["c4"].bootstrap, "conn_id": None, "sibling_of": "c3",
            "level": 1, "topics": [], "backfill": "retained", "since": None, "schemas": True, "adopt": False,
            "dry_run": False, **extra}


def test_onboarding_a_fourth_cluster_under_traffic_is_exactly_once_and_positions_its_groups(
        kafka_clusters, make_topic, operator_state):
    from airflow.models import Variable

    topic = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=2)
    topo = topology(kafka_clusters, THREE, [topic], names=("c1", "c2", "c3"))
    settings = clients(kafka_clusters, topo)
    expected = []
    for origin in ("c1", "c2", "c3"):
        expected += traffic(kafka_clusters, origin, topic, 150)
    converge(topo, settings)

    # a consumer group on c1 with a known position, distributed as mirror_offsets would
    taken = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "onboard-g", 200)
    cl = {n: ClusterClient(n, s) for n, s in settings.items()}
    for c in cl.values():
        ensure_topic(c)
    publish_owned(cl["c1"], ["onboard-g"], topo.selects)
    assert not distribute({lv: topo.links(lv) for lv in topo.levels}, cl).errors
    Variable.set(OWNERS_VARIABLE, json.dumps({"onboard-g": "c1"}))

    dag = build_onboard_dag(topo)
    assert {"cluster", "bootstrap", "conn_id", "sibling_of", "level", "topics", "backfill", "since", "schemas",
            "dry_run"} <= set(dag.params)

    dry = dag.test(run_conf=form(kafka_clusters, dry_run=True))
    assert dry.state == "success"
    plan = xcom(dry, "preflight")
    assert plan["link_id"] == "c3.L1" and plan["pins"] == {"c2.L3": "c3"} and plan["bits"] == 0b101
    assert partitions_of(kafka_clusters, "c4", topic) == 0, "a dry run creates nothing"
    assert operator_state(CHANGES_VARIABLE, "[]") == []

    with Traffic(kafka_clusters, topic, ["c1", "c2", "c3"]) as flowing, LevelRuns(lambda: (topo, {}), settings) as runs:
        flowing.wait_for(300)
        run = dag.test(run_conf=form(kafka_clusters))
        flowing.wait_for(len(flowing.ids) + 150)
    assert run.state == "success", {t: xcom(run, t) for t in ("preflight", "backfill", "verify", "summary")}
    print(f"level rounds during onboarding: {runs.rounds}; messages produced meanwhile: {len(flowing.ids)}")
    expected += flowing.ids
    backfill = xcom(run, "backfill")
    assert backfill["ok"] and backfill["copied"] >= 450
    verified = xcom(run, "verify")
    assert verified["ok"] and verified["compared"] >= 450
    assert xcom(run, "positions")["groups"] == ["onboard-g"]

    # the change is durable: the effective topology has c4 where the form said, c2.L3 pinned to c3
    changes = operator_state(CHANGES_VARIABLE, "[]")
    assert [(e["op"], e["cluster"], e["sibling_of"], e["level"]) for e in changes] == [("add", "c4", "c3", 1)]
    targets = operator_state(TARGETS_VARIABLE)
    assert targets == {"c2.L3": "c3"}
    grown = apply_changes(topo, changes)
    assert grown.levels == [1, 3] and {l.link_id for l in grown.links(1)} >= {"c3.L1", "c4.L1"}
    assert operator_state(ONBOARDING_VARIABLE) == {}, "a finished onboarding leaves no record behind"

    # from here on the regular level runs of the grown tree take over: nothing lost, nothing twice
    expected += traffic(kafka_clusters, "c4", topic, 60)
    converge(grown, clients(kafka_clusters, grown), targets=targets)
    assert_exactly_once(kafka_clusters, ["c1", "c2", "c3", "c4"], topic, expected)

    # the group positioned on c4 skips nothing it had not consumed on c1
    after = read_from_committed(kafka_clusters["c4"].bootstrap, topic, "onboard-g", 2)
    skipped = set(expected) - set(taken) - set(after)
    assert not skipped, f"{len(skipped)} messages skipped by the group on c4, e.g. {sorted(skipped)[:3]}"


def test_a_topic_clash_stops_preflight_and_nothing_is_created(kafka_clusters, make_topic, operator_state):
    topic = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=2)
    other = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=1)
    make_topic("c4", partitions=3, name=topic)  # same name, different partition count
    topo = topology(kafka_clusters, THREE, [topic, other], names=("c1", "c2", "c3"))
    dag = build_onboard_dag(topo)
    run = dag.test(run_conf=form(kafka_clusters))
    assert run.state == "failed"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["preflight"] == "failed" and states["create_topics"] == "upstream_failed", states

    from mirrorflow_airflow.factories.onboard import run_preflight

    with pytest.raises(Exception) as refused:
        run_preflight(topo, form(kafka_clusters), "t")
    message = str(refused.value)
    assert f"{topic}: 3 partitions on c4, 2 on c3" in message and "nothing was created" in message
    names = AdminClient({"bootstrap.servers": kafka_clusters["c4"].bootstrap}).list_topics(timeout=10).topics
    assert other not in names and partitions_of(kafka_clusters, "c4", topic) == 3
    assert operator_state(CHANGES_VARIABLE, "[]") == [] and operator_state(ONBOARDING_VARIABLE) == {}


def _delete_before(bootstrap: str, topic: str, partitions: int, keep: float) -> int:
    """Retention, by hand: delete the first part of every partition (all but ``keep`` of it); returns how many."""
    from confluent_kafka import TopicPartition

    from tests.integration.kafka_io import stable_end_offsets

    ends = stable_end_offsets(bootstrap, topic, partitions)
    cuts = [TopicPartition(topic, p, int(ends[p] * (1 - keep))) for p in range(partitions)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for tp, future in admin.delete_records(cuts, request_timeout=30).items():
        future.result(timeout=60)
    return sum(tp.offset for tp in cuts)


def test_onboarding_from_the_archive_restores_history_the_peers_deleted(kafka_clusters, make_topic, s3_bucket,
                                                                        operator_state, monkeypatch):
    from mirrorflow.archive.reader import coverage
    from mirrorflow_airflow.factories.archive import build_archive_dag

    topic = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=2)
    topo = topology(kafka_clusters, THREE, [topic], names=("c1", "c2", "c3"),
                    extra="archive: {clusters: [c3], schedule: 1h}\n")
    settings = clients(kafka_clusters, topo)
    monkeypatch.setenv("AIRFLOW_CONN_MIRRORFLOW_ARCHIVE", json.dumps({
        "conn_type": "aws", "login": s3_bucket.access_key_id, "password": s3_bucket.secret_access_key,
        "extra": {"endpoint_url": s3_bucket.endpoint_url, "region_name": s3_bucket.region,
                  "bucket": s3_bucket.bucket, "prefix": "history"}}))
    expected = []
    for origin in ("c1", "c2", "c3"):
        expected += traffic(kafka_clusters, origin, topic, 100)
    converge(topo, settings)

    archived = build_archive_dag(topo).test()
    assert archived.state == "success"
    assert xcom(archived, "archive")["archived"] == 300
    location = dataclasses.replace(s3_bucket, prefix="history")
    assert all(coverage(location, "c3", topic, p) for p in (0, 1))

    # retention takes the older half on every peer; only the archive still has it
    deleted = {c: _delete_before(kafka_clusters[c].bootstrap, topic, 2, keep=0.5) for c in ("c1", "c2", "c3")}
    assert all(deleted.values())
    expected += traffic(kafka_clusters, "c1", topic, 40, start=100)
    converge(topo, settings)

    run = build_onboard_dag(topo).test(run_conf=form(kafka_clusters, backfill="archive"))
    assert run.state == "success", {t: xcom(run, t) for t in ("preflight", "backfill", "verify")}
    backfill = xcom(run, "backfill")
    # the archive restores its whole range (up to where it ends), then Kafka continues on c3
    assert backfill["restored"] == 300 and backfill["lost_to_retention"] == 0
    # verify counts what only c4 holds now (offsets deleted on c3 include transaction markers)
    assert 0 < xcom(run, "verify")["history_only_on_new"] <= deleted["c3"]

    grown = apply_changes(topo, operator_state(CHANGES_VARIABLE, "[]"))
    converge(grown, clients(kafka_clusters, grown), targets=operator_state(TARGETS_VARIABLE))
    assert_exactly_once(kafka_clusters, ["c4"], topic, expected)  # the whole history, once
