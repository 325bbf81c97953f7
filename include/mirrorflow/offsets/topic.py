"""The internal topic ``_mirrorflow.offsets``: create it, publish positions, read the latest ones."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.errors import KafkaOperationError
from mirrorflow.kafka.admin import earliest_and_stable, list_topics
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.offsets.position import OFFSETS_TOPIC, Position

log = logging.getLogger(__name__)
_pause = threading.Event()  # never set: .wait(t) is a back-off between retries

#: Compacted: each cluster keeps the latest record of every (owner, group, topic, partition).
TOPIC_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"}


def ensure_topic(client: ClusterClient, timeout: float = 30.0) -> bool:
    """Create the offsets topic if it is missing; ``True`` if it was created."""
    admin = AdminClient(client.admin())
    metadata = admin.list_topics(timeout=timeout)
    if OFFSETS_TOPIC in metadata.topics:
        return False
    future = admin.create_topics([NewTopic(OFFSETS_TOPIC, num_partitions=1, replication_factor=-1,
                                           config=dict(TOPIC_CONFIG))], request_timeout=timeout)[OFFSETS_TOPIC]
    try:
        future.result(timeout=timeout + 5)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise KafkaOperationError(client.name, f"create topic {OFFSETS_TOPIC}", exc.args[0]) from exc
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # usable once its partition has a leader
        topic = admin.list_topics(OFFSETS_TOPIC, timeout=timeout).topics.get(OFFSETS_TOPIC)
        if topic is not None and topic.error is None and topic.partitions and topic.partitions[0].leader >= 0:
            break
        _pause.wait(0.2)  # back-off while the new partition gets its leader
    return True


def publish(client: ClusterClient, positions: Iterable[Position], timeout: float = 30.0) -> int:
    """Write positions to the cluster's offsets topic; every delivery is checked."""
    producer = Producer(client.producer(**{"linger.ms": 5}))
    failures: list[str] = []
    count = 0

    def delivered(err, msg) -> None:
        if err is not None:
            failures.append(f"{msg.key()!r}: {err}")

    for pos in positions:
        producer.produce(OFFSETS_TOPIC, key=pos.key(), value=pos.to_json(), partition=0, on_delivery=delivered)
        count += 1
    left = producer.flush(timeout)
    if left or failures:
        detail = failures[0] if failures else f"{left} records not acknowledged within {timeout:.0f}s"
        raise KafkaOperationError(client.name, f"publish positions to {OFFSETS_TOPIC}",
                                  KafkaError(KafkaError._TIMED_OUT if left else KafkaError._FAIL, detail))
    return count


def read_positions(client: ClusterClient, timeout: float = 30.0) -> dict[bytes, Position]:
    """The newest position (highest ``seq``) of every key on this cluster (read_committed, up to its end).

    Records mirrorflow cannot parse are skipped with a warning naming their
    offset, never guessed at.
    """
    if OFFSETS_TOPIC not in list_topics(client, timeout):
        return {}  # nothing published or distributed to this cluster yet
    tp = TopicPartition(OFFSETS_TOPIC, 0)
    lows, ends = earliest_and_stable(client, [tp], timeout)
    low, end = lows[(OFFSETS_TOPIC, 0)], ends[(OFFSETS_TOPIC, 0)]
    latest: dict[bytes, Position] = {}
    if end <= low:
        return latest
    consumer = Consumer(client.consumer("_mirrorflow.offsets.reader", **{"enable.partition.eof": True}))
    try:
        consumer.assign([TopicPartition(OFFSETS_TOPIC, 0, low)])
        deadline = time.monotonic() + timeout
        while True:
            msgs = consumer.consume(num_messages=1000, timeout=1.0)
            if not msgs and time.monotonic() > deadline:
                raise KafkaOperationError(client.name, f"read {OFFSETS_TOPIC}",
                                          KafkaError(KafkaError._TIMED_OUT, f"stuck before offset {end}"))
            done = False
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        done = done or msg.offset() >= end
                        continue
                    raise KafkaOperationError(client.name, f"read {OFFSETS_TOPIC}", err)
                if msg.offset() >= end:
                    done = True
                    break
                if msg.value() is None:
                    continue  # a tombstone
                try:
                    pos = Position.from_json(msg.value())
                except Exception as exc:
                    log.warning("%s %s@%d: %s; skipped", client.name, OFFSETS_TOPIC, msg.offset(), exc)
                    continue
                old = latest.get(pos.key())
                if old is None or pos.seq >= old.seq:
                    latest[pos.key()] = pos
                if msg.offset() + 1 >= end:
                    done = True
            if done:
                return latest
    except KafkaException as exc:
        raise KafkaOperationError(client.name, f"read {OFFSETS_TOPIC}", exc.args[0]) from exc
    finally:
        consumer.close()
