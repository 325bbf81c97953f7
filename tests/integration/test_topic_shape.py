"""Target topics kept in the shape of their source: partitions and travelling configs.

The planner (``plan_shape``) is pure and tested on its own; everything else runs
against the session's real KRaft clusters (c1 is the source, c2 the target). No
mocks and no sleeps: every wait is a condition on broker metadata with a deadline.
"""

from __future__ import annotations

import json
import logging
import pickle
import re
import threading
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from mirrorflow.cluster_sync import (
    PartitionCountConflict,
    ShapeResult,
    apply_shape,
    plan_shape,
    sync_topic_shapes,
    with_headroom,
)
from mirrorflow.errors import KafkaOperationError
from mirrorflow.journal import JOURNAL_LOGGER
from mirrorflow.kafka import TRAVELLING_CONFIGS, TopicShape, describe_topics
from mirrorflow.topology import Topology
from mirrorflow_dev.kafka import LocalCluster
from tests.fixtures.kafka import wait_for_topic
from tests.integration.topic_configs import client_of, explicit_configs, wait_until

_pause = threading.Event()  # never set; .wait(t) paces probe loops
SHAPE_EVENTS = {"topic_create", "topic_partitions_add", "topic_config_align"}


# --------------------------------------------------------------------------- plan_shape (pure)


def shape(name: str, partitions: int, cluster: str = "", **configs: str) -> TopicShape:
    return TopicShape(name, partitions, {k.replace("_", "."): v for k, v in configs.items()}, cluster)


def test_plan_creates_missing_topics_with_source_partitions_and_travelling_configs_only():
    src = {"orders": TopicShape("orders", 3, {"retention.ms": "1000", "min.insync.replicas": "2",
                                              "unclean.leader.election.enable": "true"}, "c1")}
    plan = plan_shape(src, {})
    assert [(c.topic, c.partitions, c.configs) for c in plan.create] == [("orders", 3, {"retention.ms": "1000"})]
    assert plan.has_changes and not (plan.add_partitions or plan.conflicts or plan.drift or plan.deleted_on_source)


def test_the_record_size_limit_gets_room_for_the_headers_once_and_is_never_lowered():
    limit = "max.message.bytes"
    src = TopicShape("t", 1, {limit: "5242880"}, "c1", max_message_bytes=5242880)
    created = plan_shape({"t": src}, {})
    assert created.create[0].configs == {limit: "5248087"} and created.limits == {"t": (5248087, 5242880)}
    # the copy of a copy keeps the value: in a tree the limits settle instead of growing
    copy = TopicShape("t", 1, {limit: "5248087"}, "c2", max_message_bytes=5248087)
    assert plan_shape({"t": copy}, {}).create[0].configs == {limit: "5248087"}
    assert plan_shape({"t": copy}, {"t": copy}).is_empty
    # a target with the source's limit but no room: drift, aligned to the room; a larger one is left alone
    same = TopicShape("t", 1, {limit: "5242880"}, "c2", max_message_bytes=5242880)
    plan = plan_shape({"t": src}, {"t": same}, align_configs=True)
    assert plan.drift_of("t") == {limit: ("5248087", "5242880")} and plan.limits["t"] == (5248087, 5242880)
    larger = TopicShape("t", 1, {limit: "9000000"}, "c2", max_message_bytes=9000000)
    assert plan_shape({"t": src}, {"t": larger}).is_empty
    # both on their brokers' defaults: not compared; the copier is told the target's limit all the same
    defaults = plan_shape({"t": TopicShape("t", 1, {}, "c1", max_message_bytes=1048588)},
                          {"t": TopicShape("t", 1, {}, "c2", max_message_bytes=1048588)})
    assert defaults.is_empty and defaults.limits["t"] == (1048588, 1048588)


def test_plan_adds_partitions_when_the_target_has_fewer():
    plan = plan_shape({"t": shape("t", 5)}, {"t": shape("t", 3)})
    assert [(a.topic, a.current, a.wanted) for a in plan.add_partitions] == [("t", 3, 5)]
    assert not plan.create and not plan.conflicts


def test_plan_conflict_when_the_target_has_more_partitions_names_cluster_topic_and_counts():
    src = {"a": shape("a", 2, "c1"), "b": shape("b", 1, "c1")}
    plan = plan_shape(src, {"a": shape("a", 4, "c2")})
    conflict = plan.conflicts["a"]
    assert isinstance(conflict, PartitionCountConflict)
    assert (conflict.cluster, conflict.topic, conflict.target_partitions, conflict.source_partitions) == ("c2", "a", 4, 2)
    for word in ("cluster c2", "topic a", "4 partitions", "2 of its source", "cluster c1"):
        assert word in str(conflict)
    assert [c.topic for c in plan.create] == ["b"]  # the other topic is still planned
    assert not plan.add_partitions
    again = pickle.loads(pickle.dumps(conflict))
    assert str(again) == str(conflict) and again.topic == "a"


def test_plan_reports_drift_and_aligns_only_when_asked():
    src = {"t": shape("t", 1, retention_ms="1000", cleanup_policy="compact,delete")}
    tgt = {"t": shape("t", 1, retention_ms="2000", cleanup_policy="delete,compact", segment_ms="60000")}
    tgt["t"].configs["min.insync.replicas"] = "2"  # cluster-owned: never drift
    plan = plan_shape(src, tgt)
    assert plan.drift_of("t") == {"retention.ms": ("1000", "2000"), "segment.ms": (None, "60000")}
    assert not plan.align and not plan.has_changes and not plan.is_empty
    aligned = plan_shape(src, tgt, align_configs=True)
    assert [(a.topic, a.set, a.delete) for a in aligned.align] == [("t", {"retention.ms": "1000"}, ("segment.ms",))]


def test_plan_reports_topics_deleted_on_source_and_never_plans_anything_for_them():
    plan = plan_shape({"kept": shape("kept", 1)}, {"kept": shape("kept", 1), "gone": shape("gone", 2)})
    assert plan.deleted_on_source == ("gone",)
    assert not plan.has_changes


def test_plan_of_identical_shapes_is_empty():
    same = {"t": shape("t", 3, retention_ms="1000")}
    assert plan_shape(same, {"t": shape("t", 3, retention_ms="1000")}).is_empty


@pytest.mark.parametrize("internal", ["__foo", "__consumer_offsets", "_schemas", "_mirrorflow", "_mirrorflow-progress"])
def test_plan_never_touches_internal_topics(internal: str):
    plan = plan_shape({internal: shape(internal, 3)}, {})
    assert plan.is_empty
    plan = plan_shape({internal: shape(internal, 3)}, {internal: shape(internal, 1)})
    assert plan.is_empty
    plan = plan_shape({}, {internal: shape(internal, 1)})  # not "deleted on source" either
    assert plan.is_empty
    topology = Topology.parse({
        "clusters": {"c1": {"bootstrap": "127.0.0.1:1"}, "c2": {"bootstrap": "127.0.0.1:2"}},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        # the file refuses a literal internal name; a regex that matches it is accepted but never selects it
        "topics": [".*", f"[{internal[0]}]{re.escape(internal[1:])}"],
    })
    assert not topology.selects(internal)


def test_plan_warns_about_log_append_time_and_a_finite_before_max_on_the_target():
    src = {
        "lat": shape("lat", 1, message_timestamp_type="LogAppendTime"),
        "old": shape("old", 1, message_timestamp_before_max_ms="3600000"),
        "fine": shape("fine", 1, message_timestamp_type="CreateTime"),
    }
    plan = plan_shape(src, {})
    assert {(w.topic, w.key) for w in plan.warnings} == {
        ("lat", "message.timestamp.type"), ("old", "message.timestamp.before.max.ms")}
    assert {c.topic: c.configs for c in plan.create}["lat"] == {"message.timestamp.type": "LogAppendTime"}  # copied as is
    # An existing target on LogAppendTime by its broker's default warns too; aligning to CreateTime stops it.
    tgt = {"fine": TopicShape("fine", 1, {}, "c2", timestamp_type="LogAppendTime")}
    assert [w.topic for w in plan_shape({"fine": src["fine"]}, tgt).warnings] == ["fine"]
    assert not plan_shape({"fine": src["fine"]}, tgt, align_configs=True).warnings


# --------------------------------------------------------------------------- helpers (real brokers)


def topology_for(kafka_clusters, *patterns: str) -> Topology:
    return Topology.parse({
        "clusters": {n: {"bootstrap": kafka_clusters[n].bootstrap} for n in ("c1", "c2")},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": list(patterns),
    })


def partitions_of(cluster: LocalCluster, topic: str) -> int | None:
    tm = AdminClient(cluster.client_config()).list_topics(timeout=10).topics.get(topic)
    return None if tm is None or tm.error is not None else len(tm.partitions)


def grow(cluster: LocalCluster, topic: str, partitions: int) -> None:
    admin = AdminClient(cluster.client_config())
    admin.create_partitions([NewPartitions(topic, partitions)], operation_timeout=30)[topic].result(timeout=40)
    wait_for_topic(admin, topic, partitions)


def delete(cluster: LocalCluster, topic: str) -> None:
    admin = AdminClient(cluster.client_config())
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=40)
    wait_until(lambda: partitions_of(cluster, topic) is None, f"{topic} gone from {cluster.name}")


@pytest.fixture
def audit_events(caplog: pytest.LogCaptureFixture) -> Callable[[], list[dict]]:
    """The shape-changing audit records logged so far (parsed from their JSON lines)."""
    caplog.set_level(logging.INFO, logger=JOURNAL_LOGGER)

    def events() -> list[dict]:
        records = [json.loads(r.getMessage()) for r in caplog.records if r.name == JOURNAL_LOGGER]
        return [r for r in records if r["event"] in SHAPE_EVENTS]

    return events


@pytest.fixture
def c1_c2(kafka_clusters) -> tuple[LocalCluster, LocalCluster]:
    return kafka_clusters["c1"], kafka_clusters["c2"]


# --------------------------------------------------------------------------- real brokers


@pytest.mark.kafka
def test_new_topic_gets_source_partitions_and_exactly_the_travelling_explicit_configs(
        kafka_clusters, c1_c2, make_topic, unique_topic, audit_events):
    source, target = c1_c2
    configs = {"retention.ms": "3600000", "cleanup.policy": "compact", "compression.type": "lz4",
               "max.message.bytes": "2097152", "min.insync.replicas": "1"}
    topic = make_topic(source, partitions=3, config=configs, name=unique_topic)

    shapes = describe_topics(client_of(source), [topic, f"{topic}-absent"])
    assert list(shapes) == [topic]  # absent names are left out
    travelling = {k: v for k, v in configs.items() if k != "min.insync.replicas"}
    assert shapes[topic] == TopicShape(topic, 3, travelling, "c1", "CreateTime", 2097152)  # no broker defaults

    result = sync_topic_shapes(client_of(source), client_of(target), topology_for(kafka_clusters, re.escape(topic)))
    assert result.ok and [c.topic for c in result.created] == [topic]
    assert partitions_of(target, topic) == 3
    # Exactly the explicit travelling configs: neither min.insync.replicas nor any broker default
    # (segment.bytes, message.timestamp.type, ...) became explicit on the target; the record size limit
    # got room for the copy's headers.
    created = {**travelling, "max.message.bytes": str(with_headroom(2097152))}
    assert explicit_configs(target, topic) == created
    # Replication comes from the target's default.replication.factor (1 on the test clusters).
    md = AdminClient(target.client_config()).list_topics(timeout=10).topics[topic]
    assert {len(p.replicas) for p in md.partitions.values()} == {1}

    (line,) = audit_events()
    assert (line["event"], line["cluster"], line["topic"], line["partitions"], line["configs"], line["source"]) == (
        "topic_create", "c2", topic, 3, created, "c1")


@pytest.mark.kafka
def test_source_growth_adds_partitions_on_the_target(kafka_clusters, c1_c2, make_topic, unique_topic, audit_events):
    source, target = c1_c2
    topic = make_topic(source, partitions=3, name=unique_topic)
    topology = topology_for(kafka_clusters, re.escape(topic))
    assert sync_topic_shapes(client_of(source), client_of(target), topology).ok
    assert partitions_of(target, topic) == 3

    grow(source, topic, 5)
    result = sync_topic_shapes(client_of(source), client_of(target), topology)
    assert result.ok and [(a.topic, a.current, a.wanted) for a in result.partitions_added] == [(topic, 3, 5)]
    assert partitions_of(target, topic) == 5  # apply_shape returns once metadata shows them
    assert [e["event"] for e in audit_events()] == ["topic_create", "topic_partitions_add"]
    assert audit_events()[-1]["partitions_before"] == 3 and audit_events()[-1]["partitions"] == 5


@pytest.mark.kafka
def test_target_with_more_partitions_is_a_conflict_and_other_topics_still_sync(
        kafka_clusters, c1_c2, make_topic, unique_topic):
    source, target = c1_c2
    wide = make_topic(source, partitions=2, name=f"{unique_topic}-wide")
    make_topic(target, partitions=4, name=wide)
    fresh = make_topic(source, partitions=2, name=f"{unique_topic}-fresh")

    result = sync_topic_shapes(client_of(source), client_of(target), topology_for(kafka_clusters, f"{re.escape(unique_topic)}-.*"))
    assert set(result.blocked) == {wide} and not result.ok
    message = str(result.blocked[wide])
    assert all(word in message for word in ("cluster c2", f"topic {wide}", "4 partitions", "2 of its source"))
    assert [c.topic for c in result.created] == [fresh]
    assert partitions_of(target, fresh) == 2 and partitions_of(target, wide) == 4  # nothing removed


@pytest.mark.kafka
def test_topic_deleted_on_source_is_reported_and_kept_on_the_target(kafka_clusters, c1_c2, make_topic, unique_topic):
    source, target = c1_c2
    topic = make_topic(source, partitions=2, name=unique_topic)
    topology = topology_for(kafka_clusters, re.escape(topic))
    assert sync_topic_shapes(client_of(source), client_of(target), topology).created

    delete(source, topic)
    result = sync_topic_shapes(client_of(source), client_of(target), topology)
    assert result.plan.deleted_on_source == (topic,)
    assert result.ok and not result.changed
    assert partitions_of(target, topic) == 2


@pytest.mark.kafka
def test_second_sync_does_nothing(kafka_clusters, c1_c2, make_topic, unique_topic, audit_events):
    source, target = c1_c2
    make_topic(source, partitions=3, config={"retention.ms": "86400000", "cleanup.policy": "compact"},
               name=f"{unique_topic}-a")
    make_topic(source, partitions=1, name=f"{unique_topic}-b")
    topology = topology_for(kafka_clusters, f"{re.escape(unique_topic)}-.*")

    first = sync_topic_shapes(client_of(source), client_of(target), topology, align_configs=True)
    assert first.ok and len(first.created) == 2 and len(audit_events()) == 2

    second = sync_topic_shapes(client_of(source), client_of(target), topology, align_configs=True)
    assert second.plan.is_empty and second.ok and not second.changed and not second.already_done
    assert len(audit_events()) == 2  # no audit line for the run that changed nothing


@pytest.mark.kafka
def test_config_drift_is_reported_and_aligned_only_when_asked(
        kafka_clusters, c1_c2, make_topic, unique_topic, audit_events):
    source, target = c1_c2
    topic = make_topic(source, partitions=1, config={"retention.ms": "7200000", "cleanup.policy": "compact"},
                       name=unique_topic)
    make_topic(target, partitions=1, name=topic,
               config={"retention.ms": "60000", "segment.ms": "3600000", "min.insync.replicas": "1"})
    topology = topology_for(kafka_clusters, re.escape(topic))

    report = sync_topic_shapes(client_of(source), client_of(target), topology)
    assert report.plan.drift_of(topic) == {"retention.ms": ("7200000", "60000"), "cleanup.policy": ("compact", None),
                                           "segment.ms": (None, "3600000")}
    assert report.ok and not report.changed and not audit_events()
    assert explicit_configs(target, topic)["retention.ms"] == "60000"

    fixed = sync_topic_shapes(client_of(source), client_of(target), topology, align_configs=True)
    assert fixed.ok and [a.topic for a in fixed.aligned] == [topic]
    # Travelling keys now equal the source's; the cluster-owned min.insync.replicas is untouched.
    assert explicit_configs(target, topic) == {"retention.ms": "7200000", "cleanup.policy": "compact",
                                               "min.insync.replicas": "1"}
    (line,) = audit_events()
    assert (line["event"], line["set"], line["removed"]) == (
        "topic_config_align", {"cleanup.policy": "compact", "retention.ms": "7200000"}, ["segment.ms"])
    assert sync_topic_shapes(client_of(source), client_of(target), topology).plan.is_empty


@pytest.mark.kafka
def test_two_runs_racing_on_the_same_plan_both_succeed(kafka_clusters, c1_c2, make_topic, unique_topic):
    source, target = c1_c2
    new = make_topic(source, partitions=4, config={"retention.ms": "600000"}, name=f"{unique_topic}-new")
    growing = make_topic(source, partitions=6, name=f"{unique_topic}-grow")
    make_topic(target, partitions=2, name=growing)
    names = [new, growing]
    plan = plan_shape(describe_topics(client_of(source), names), describe_topics(client_of(target), names))
    assert [c.topic for c in plan.create] == [new] and [a.topic for a in plan.add_partitions] == [growing]

    start = threading.Barrier(2)
    results: list[ShapeResult] = []
    crashes: list[BaseException] = []

    def run() -> None:
        try:
            start.wait(timeout=10)
            results.append(apply_shape(client_of(target), plan))
        except BaseException as exc:  # surfaced below, not lost in the thread
            crashes.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not crashes and len(results) == 2
    assert all(r.ok for r in results), [(r.failed, r.align_failed) for r in results]
    # Exactly one run created / grew each topic; the other found it done.
    assert sum(len(r.created) for r in results) == 1
    assert sum(len(r.partitions_added) for r in results) == 1
    assert sorted(t for r in results for t in r.already_done) == sorted(names)
    assert partitions_of(target, new) == 4 and partitions_of(target, growing) == 6
    default_limit = describe_topics(client_of(source), [new])[new].max_message_bytes
    assert explicit_configs(target, new) == {"retention.ms": "600000",
                                             "max.message.bytes": str(with_headroom(default_limit))}


@pytest.mark.kafka
def test_one_failing_topic_does_not_stop_the_others(kafka_clusters, c1_c2, unique_topic):
    _, target = c1_c2
    bad, good = f"{unique_topic}-bad", f"{unique_topic}-good"
    plan = plan_shape({bad: TopicShape(bad, 1, {"cleanup.policy": "bogus"}, "c1"),
                       good: TopicShape(good, 2, {}, "c1")}, {})
    result = apply_shape(client_of(target), plan)
    error = result.failed[bad]
    assert isinstance(error, KafkaOperationError)
    assert (error.cluster, error.code_name) == ("c2", "INVALID_CONFIG") and bad in error.operation
    assert set(result.blocked) == {bad}
    assert [c.topic for c in result.created] == [good] and partitions_of(target, good) == 2
    assert partitions_of(target, bad) is None


@pytest.mark.kafka
def test_many_partitions_are_created_and_grown_in_requests_the_controller_accepts(
        kafka_clusters, c1_c2, unique_topic, monkeypatch):
    # A KRaft controller refuses a request writing more than 10,000 records, which failed every
    # topic of a plan of 10,000 partitions at once; apply_shape now cuts its requests. The limit is
    # lowered here so that a few small topics need several requests.
    import mirrorflow.kafka.topics as topics_module

    _, target = c1_c2
    sent: list[int] = []
    real = AdminClient.create_topics

    def counting(self, new_topics, *args, **kwargs):
        sent.append(sum(t.num_partitions for t in new_topics))
        return real(self, new_topics, *args, **kwargs)

    monkeypatch.setattr(topics_module, "PARTITIONS_PER_REQUEST", 5)
    monkeypatch.setattr(AdminClient, "create_topics", counting)
    names = [f"{unique_topic}-{i}" for i in range(4)]
    plan = plan_shape({n: TopicShape(n, 3, {}, "c1") for n in names}, {})
    result = apply_shape(client_of(target), plan)
    assert result.ok and sorted(c.topic for c in result.created) == names
    assert sent == [3, 3, 3, 3] and all(partitions_of(target, n) == 3 for n in names)

    grown = plan_shape({n: TopicShape(n, 6, {}, "c1") for n in names},
                       {n: TopicShape(n, 3, {}, "c2") for n in names})
    result = apply_shape(client_of(target), grown)
    assert result.ok and len(result.partitions_added) == 4
    assert all(partitions_of(target, n) == 6 for n in names)


def test_batches_keep_order_and_stay_within_the_limit():
    from mirrorflow.kafka.topics import batches

    assert batches([], len, 5) == []
    assert batches([2, 2, 1, 4, 6, 1], lambda n: n, 5) == [[2, 2, 1], [4], [6], [1]]
    assert batches(list(range(1, 4)), lambda n: 1, 2) == [[1, 2], [3]]


@pytest.mark.kafka
def test_internal_topics_on_the_source_are_never_planned(kafka_clusters, c1_c2, make_topic, unique_topic):
    source, target = c1_c2
    internal = [make_topic(source, name=f"__{unique_topic}"), make_topic(source, name=f"_mirrorflow-{unique_topic}")]
    normal = make_topic(source, name=f"x-{unique_topic}")
    topology = topology_for(kafka_clusters, f".*{re.escape(unique_topic)}", "_schema[s]")

    result = sync_topic_shapes(client_of(source), client_of(target), topology)
    assert [c.topic for c in result.created] == [normal]
    assert all(partitions_of(target, t) is None for t in internal)
    # Even when handed their shapes directly, the planner leaves them alone.
    shapes = describe_topics(client_of(source), internal)
    assert set(shapes) == set(internal) and plan_shape(shapes, {}).is_empty


def test_travelling_configs_leave_cluster_owned_settings_behind():
    for owned in ("replication.factor", "min.insync.replicas", "unclean.leader.election.enable",
                  "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
                  "remote.storage.enable", "local.retention.ms", "local.retention.bytes", "preallocate"):
        assert owned not in TRAVELLING_CONFIGS
    assert "message.timestamp.difference.max.ms" not in TRAVELLING_CONFIGS  # removed in Kafka 4.0
