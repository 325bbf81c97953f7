"""Every timestamp travels as it is: none stays none, a CreateTime of 0 is the one librdkafka cannot write.

The source records are written by Kafka's own Java producer (librdkafka, like the
copier's client, turns a timestamp of 0 into "now"), so the test sees exactly
what an application writing CreateTime 0 leaves on the source.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, TopicPartition

from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.task import PartitionTask
from mirrorflow.kafka.config import ClusterClient
from tests.integration.kafka_io import produce

pytestmark = pytest.mark.kafka

JAVA = Path(__file__).parent / "java" / "ProduceAt.java"


def _timestamps(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-timestamps", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, "no end of partition within 10 s"
            if msg.error():
                return out
            out.append((msg.value().decode(), msg.timestamp()))
    finally:
        consumer.close()


def test_create_time_0_is_copied_at_1_ms_and_counted_other_times_exactly(kafka_clusters, kafka_distribution,
                                                                         make_topic):
    topic = make_topic("c1", partitions=1)
    make_topic("c2", partitions=1, name=topic)
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    subprocess.run(["java", "-cp", kafka_distribution.classpath, str(JAVA), c1, topic, "0",
                    "0:zero", "1:one", "1714608000000:may"], check=True, timeout=120, capture_output=True)
    produce(c1, topic, [(None, b"none", None, -1)], partition=0)  # no timestamp (-1): librdkafka keeps it
    source = _timestamps(c1, topic)
    assert [ts for _, (_, ts) in source] == [0, 1, 1714608000000, -1]

    task = PartitionTask(link_id="c1.L1", level=1, source="c1", target="c2", topic=topic, partition=0, end_offset=4)
    result = copy_partition(task, ClusterClient("c1", {"bootstrap.servers": c1}),
                            ClusterClient("c2", {"bootstrap.servers": c2}))
    assert result.ok and (result.copied, result.retimed) == (4, 1)
    copies = _timestamps(c2, topic)
    assert [v for v, _ in copies] == ["zero", "one", "may", "none"]
    assert [ts for _, (_, ts) in copies] == [1, 1, 1714608000000, -1]
    assert all(kind == TIMESTAMP_CREATE_TIME for v, (kind, _) in copies if v != "none")
