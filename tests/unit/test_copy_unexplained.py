"""A copier error that is no refusal names the cluster and what the copy was doing (librdkafka's text names neither)."""

from __future__ import annotations

from confluent_kafka import KafkaError

from mirrorflow.copy.engine.access import unexplained
from mirrorflow.copy.task import PartitionTask
from mirrorflow.kafka.config import ClusterClient

TASK = PartitionTask(link_id="c1.L1", level=1, source="c1", target="c2", topic="orders", partition=3, end_offset=10)
SOURCE = ClusterClient("c1", {"bootstrap.servers": "127.0.0.1:1"})
TARGET = ClusterClient("c2", {"bootstrap.servers": "127.0.0.1:2"})
TIMED_OUT = KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for operation to finish, retry call to resume")


def test_a_producer_that_cannot_start_names_the_target_and_the_exactly_once_producer():
    assert unexplained(TASK, "start", TIMED_OUT, SOURCE, TARGET) == (
        "_TIMED_OUT on c2 while starting the exactly-once producer of orders[3] of link c1.L1: Timed out waiting "
        "for operation to finish, retry call to resume")


def test_a_read_names_the_source_and_an_unknown_stage_keeps_the_clients_words():
    assert unexplained(TASK, "read", TIMED_OUT, SOURCE, TARGET).startswith(
        "_TIMED_OUT on c1 while reading the messages of orders[3] of link c1.L1: ")
    assert unexplained(TASK, None, TIMED_OUT, SOURCE, TARGET) == (
        "_TIMED_OUT: Timed out waiting for operation to finish, retry call to resume")
