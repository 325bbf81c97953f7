"""Single-partition compacted topics used as key-value stores: create, read whole, write with checks.

mirrorflow's offsets topic and the schema registry's ``_schemas`` topic are both
this shape: one partition (so order is total), compacted (so the latest record
per key is the state). Reading one means reading partition 0 from its first
offset up to its stable end as it was when the read began; writing one means
every record acknowledged or a loud error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.errors import KafkaOperationError
from mirrorflow.kafka.admin import earliest_and_stable, list_topics
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.ranges import RangeReader
from mirrorflow.kafka.refusals import Need, call_failed, refusal

log = logging.getLogger(__name__)
_pause = threading.Event()  # never set: .wait(t) is a back-off while a new partition gets its leader


def ensure_compacted(client: ClusterClient, topic: str, config: dict[str, str], timeout: float = 30.0) -> bool:
    """Create ``topic`` (one partition, ``config``) if it is missing; ``True`` if it was created."""
    admin = AdminClient(client.admin())
    metadata = admin.list_topics(timeout=timeout)
    if topic in metadata.topics:
        return False
    future = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1, config=dict(config))],
                                 request_timeout=timeout)[topic]
    try:
        future.result(timeout=timeout + 5)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise call_failed(client, f"create topic {topic}", exc.args[0], Need("TOPIC", topic, "CREATE")) from exc
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # usable once its partition has a leader
        meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions and meta.partitions[0].leader >= 0:
            break
        _pause.wait(0.2)
    return True


def _hidden(client: ClusterClient, topic: str, timeout: float) -> bool:
    """``False`` when ``topic`` does not exist; raises naming the ACL when it exists but is not ours to see."""
    admin = AdminClient(client.admin())
    future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
    try:
        future.result(timeout=timeout + 5)
    except KafkaException as exc:
        named = refusal(client.name, client.settings, exc.args[0], f"reading {topic}", Need("TOPIC", topic, "READ"))
        if named is not None:
            raise named from exc
        return False  # UNKNOWN_TOPIC_OR_PART: missing indeed
    return True  # listed a moment ago as missing, there now: read it


def read_whole(client: ClusterClient, topic: str, reader_group: str, timeout: float = 30.0) -> Iterator[Any]:
    """Every record of partition 0 from its first offset to its stable end, in order (tombstones too).

    Yields nothing when the topic does not exist. Raises
    :class:`KafkaOperationError` naming the cluster and topic when the read
    fails or makes no progress for ``timeout`` seconds (a bounded read,
    :mod:`mirrorflow.kafka.ranges`), and :class:`NotAuthorized` when the topic
    is hidden from this principal (Kafka lists only the topics a principal may
    describe, so a store it may not read would look empty).
    """
    if topic not in list_topics(client, timeout) and not _hidden(client, topic, timeout):
        return
    tp = TopicPartition(topic, 0)
    lows, ends = earliest_and_stable(client, [tp], timeout)
    low, end = lows[(topic, 0)], ends[(topic, 0)]
    if end <= low:
        return
    with RangeReader.open(client, reader_group, timeout=timeout) as reader:
        yield from reader.range(topic, 0, low, end)


#: Records sent before waiting for their acknowledgement: bounds what is in flight and paces progress logs.
WRITE_CHUNK = 1000


def write_all(client: ClusterClient, topic: str, records: Iterable[tuple[bytes, bytes | None]],
              on_written: Callable[[int], None] | None = None, timeout: float = 30.0) -> int:
    """Write ``(key, value)`` records to partition 0 in order; all acknowledged, or an error.

    ``on_written(i)`` is called for the i-th record once the cluster has
    acknowledged it (the idempotent producer keeps them in order), so callers
    can audit exactly what landed even when a later record fails. Records go
    out in chunks of :data:`WRITE_CHUNK`, each acknowledged before the next is
    sent, so a writer stopped midway has landed a prefix of whole chunks plus
    at most one partial chunk, and a long write logs its progress.
    """
    producer = Producer(client.producer(**{"linger.ms": 5}))
    failures: list[str] = []
    refused: list[Any] = []
    count = 0

    def delivered(index: int, err, msg) -> None:
        if err is not None:
            failures.append(f"{msg.key()!r}: {err}")
            refused.append(err)
        elif on_written is not None:
            on_written(index)

    def settle() -> None:
        left = producer.flush(timeout)
        if refused:
            named = refusal(client.name, client.settings, refused[0], f"writing {topic}", Need("TOPIC", topic, "WRITE"))
            if named is not None:
                raise named
        if left or failures:
            detail = failures[0] if failures else f"{left} records not acknowledged within {timeout:.0f}s"
            raise KafkaOperationError(client.name, f"write {topic}",
                                      KafkaError(KafkaError._TIMED_OUT if left else KafkaError._FAIL, detail))

    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0,
                         on_delivery=lambda err, msg, i=count: delivered(i, err, msg))
        count += 1
        if count % WRITE_CHUNK == 0:
            settle()
            log.info("%s %s: %d records written", client.name, topic, count)
    settle()
    return count
