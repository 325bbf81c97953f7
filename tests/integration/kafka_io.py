"""Small produce/read helpers for integration tests (real brokers, conditions with deadlines)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow.kafka.deadline import within

_pause = threading.Event()


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int

    def header(self, name: str) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)


def client_conf(bootstrap: str | Mapping[str, Any]) -> dict[str, Any]:
    """A bootstrap address (plaintext clusters) or a whole client config (secured ones) as a config dict."""
    return {"bootstrap.servers": bootstrap} if isinstance(bootstrap, str) else dict(bootstrap)


def produce(bootstrap: str | Mapping[str, Any], topic: str, records, partition: int | None = None) -> None:
    """Produce ``(key, value, headers, timestamp_ms)`` tuples and wait for every ack."""
    producer = Producer({**client_conf(bootstrap), "enable.idempotence": True, "linger.ms": 5})
    failures: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}: {err.name()}: {err.str()}")

    for key, value, headers, ts in records:
        kwargs = {"headers": headers or None, "on_delivery": delivered}
        if ts is not None:
            kwargs["timestamp"] = ts
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, key=key, value=value, **kwargs)
    assert producer.flush(60) == 0, "not every message was acknowledged"
    assert not failures, f"{len(failures)} messages failed: {failures[:3]}"


def stable_end_offsets(bootstrap: str | Mapping[str, Any], topic: str, partitions: int,
                       timeout: float = 30.0) -> list[int]:
    """High watermarks, once the last stable offset has caught up with them (no open transaction)."""
    admin = AdminClient(client_conf(bootstrap))
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + timeout

    def ends(isolation: IsolationLevel) -> list[int]:
        found = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, isolation_level=isolation,
                                   request_timeout=10)
        return [found[tp].result(timeout=15).offset for tp in tps]

    while True:
        # under a deadline of our own: librdkafka's ListOffsets was once seen spinning in its leader
        # lookup, and a test must fail by name rather than hang the whole run
        lso_v = within(lambda: ends(IsolationLevel.READ_COMMITTED), 15, f"list offsets of {topic}")
        hw_v = within(lambda: ends(IsolationLevel.READ_UNCOMMITTED), 15, f"list offsets of {topic}")
        if lso_v == hw_v:
            return hw_v
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: last stable offsets {lso_v} never reached high watermarks {hw_v}")
        _pause.wait(0.05)


def read_all(bootstrap: str | Mapping[str, Any], topic: str, partitions: int, timeout: float = 60.0) -> list[Record]:
    """Every committed record of the topic, in partition/offset order."""
    ends = stable_end_offsets(bootstrap, topic, partitions)
    consumer = Consumer({**client_conf(bootstrap), "group.id": "test-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         # an offset reset must never jump to the end and hide records
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    done = {p for p in range(partitions) if ends[p] == 0}
    records: list[Record] = []
    events: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: read {len(records)} records, partitions done {sorted(done)}")
            # consume() waits out its whole timeout unless the batch fills: keep it short
            for msg in consumer.consume(500, timeout=0.05):
                if msg.error():
                    events.append(f"{msg.error().name()}@{msg.partition()}:{msg.offset()}")
                    if msg.offset() >= ends[msg.partition()]:
                        done.add(msg.partition())
                    continue
                if msg.offset() < ends[msg.partition()]:
                    records.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                          tuple(msg.headers() or ()), msg.timestamp()[1]))
                if msg.offset() + 1 >= ends[msg.partition()]:
                    done.add(msg.partition())
    finally:
        consumer.close()
    if not records and any(ends):
        raise AssertionError(f"{topic}: nothing read below ends {ends}; events: {events}")
    return sorted(records, key=lambda r: (r.partition, r.offset))


def lose(bootstrap: str, topic: str, partitions: int, value: bytes) -> Record:
    """The record whose value is ``value`` deleted on one cluster, with everything before it in its partition
    (``delete_records``): a message the cluster lost. Returns the record as it was."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    [record] = [r for r in read_all(bootstrap, topic, partitions) if r.value == value]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until its futures are done
    for future in admin.delete_records([TopicPartition(topic, record.partition, record.offset + 1)],
                                       request_timeout=30).values():
        future.result(timeout=30)
    return record
