"""A target topic deleted during a copy, on a broker that creates topics on demand (Kafka's default).

The copier's producer never creates topics (``allow.auto.create.topics=false``): the
partition fails naming the topic, nothing is created with the broker's defaults, and
the next run creates the topic again in the source's shape and fills it, once.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow.copy.task import PartitionTask
from mirrorflow.kafka.config import ClusterClient
from mirrorflow_dev.kafka import LocalKafka
from tests.fixtures.kafka import TEST_BROKERS, _runs_root
from tests.integration.kafka_io import produce, read_all

pytestmark = pytest.mark.kafka

_pause = threading.Event()  # never set: .wait(t) paces the watch loop

RECORDS = 6000


@pytest.fixture(scope="module")
def auto_create(kafka_distribution):
    """A one-broker cluster with ``auto.create.topics.enable=true``, for this module only."""
    run_dir = Path(_runs_root()) / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-auto" / "kafka"
    config = {**TEST_BROKERS["broker_config"], "auto.create.topics.enable": "true"}
    kafka = LocalKafka(run_dir, names=["auto"], distribution=kafka_distribution, owner_pid=os.getpid(),
                       broker_config=config, jvm_options=TEST_BROKERS["jvm_options"])
    with kafka:
        yield kafka["auto"]


def _topics(bootstrap):
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def _target_end(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=10).topics.get(topic)
    if md is None or md.error is not None:
        return 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-watch"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def test_a_target_topic_deleted_mid_copy_is_named_never_auto_created_and_refilled_once(
        kafka_clusters, make_topic, auto_create):
    c1, target = kafka_clusters["c1"].bootstrap, auto_create.bootstrap
    topic = make_topic("c1", partitions=1, config={"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"})
    produce(c1, topic, [(f"k{i}".encode(), f"{i:06d}".encode() + b"x" * 1000, None, None) for i in range(RECORDS)],
            partition=0)
    spec = JobSpec(level=1, run_id="auto-1", topics=(topic,), links=(LinkJob("c1.L1", 1, "c1", "auto"),),
                   clusters={"c1": {"bootstrap.servers": c1}, "auto": {"bootstrap.servers": target}})
    assert run_job(JobSpec(**{**spec.__dict__, "run_id": "auto-0"})).ok  # creates the topic, as compacted
    produce(c1, topic, [(f"k{i}".encode(), f"{i:06d}".encode() + b"y" * 1000, None, None) for i in range(RECORDS)],
            partition=0)

    task = PartitionTask(link_id="c1.L1", level=1, source="c1", target="auto", topic=topic, partition=0,
                         end_offset=2 * RECORDS, max_bytes_per_second=1_000_000, txn_max_seconds=0.5)
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", copy_partition(  # waits 10 s, not 30, for acks
        task, ClusterClient("c1", {"bootstrap.servers": c1}), ClusterClient("auto", {"bootstrap.servers": target}),
        op_timeout=10.0)))
    worker.start()
    deadline = time.monotonic() + 60
    while _target_end(target, topic) < RECORDS + 500:
        assert worker.is_alive() and time.monotonic() < deadline, "the copy never got going"
        _pause.wait(0.05)
    admin = AdminClient({"bootstrap.servers": target})  # referenced: a collected client cancels its futures
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(timeout=30)
    worker.join(180)
    assert not worker.is_alive()
    result = box["result"]
    assert result.error is not None and f"{topic}" in result.error and "auto" in result.error, result.error
    assert topic not in _topics(target), "the copier's producer created the deleted topic"

    again = run_job(JobSpec(**{**spec.__dict__, "run_id": "auto-2"}))
    assert again.ok, again.summary()["errors"]
    values = [r.value[:7] for r in read_all(target, topic, 1)]
    assert values == [f"{i:06d}".encode() + b"x" for i in range(RECORDS)] + [
        f"{i:06d}".encode() + b"y" for i in range(RECORDS)]
    configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    [entries] = [f.result(timeout=30) for f in configs.values()]
    assert entries["cleanup.policy"].value == "compact"  # the source's shape, not the broker's defaults
