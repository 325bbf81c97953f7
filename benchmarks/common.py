"""What every contender shares: two local clusters, a pre-filled source topic, and a count on the target.

Every contender copies the *same* data: :func:`prefill` writes ``records``
messages of ``size`` bytes (random values, 16-byte keys, one header) round-robin
over ``partitions`` partitions of the source topic once, and each contender
copies it into a fresh, empty target topic of the same shape. The clock stops
when :func:`committed_count` sees every record on the target (read_committed
end offsets, so open transactions never count).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from mirrorflow_dev.kafka import KafkaDistribution, LocalKafka

REPO = Path(__file__).resolve().parents[1]
_pause = threading.Event()  # never set: .wait(t) is a polling interval with a deadline around it


@dataclass(frozen=True)
class Case:
    size: int
    partitions: int
    records: int

    @property
    def bytes(self) -> int:
        return self.size * self.records


def stop_on_sigterm() -> None:
    """Make ``kill`` (SIGTERM) leave through the ``finally`` blocks, which stop the brokers a run started.

    Python's default for SIGTERM ends the process at once: a benchmark stopped so
    left its brokers running (six of them, one afternoon, under the next runs).
    """
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def start_clusters(run_dir: Path, names: tuple[str, ...] = ("src", "dst")) -> LocalKafka:
    """Independent single-broker KRaft clusters on free loopback ports (stop with ``.stop()``)."""
    kafka = LocalKafka(run_dir, names=names, distribution=KafkaDistribution.fetch(), owner_pid=os.getpid())
    kafka.start()
    return kafka


@contextlib.contextmanager
def local_clusters(prefix: str, names: tuple[str, ...] = ("src", "dst")) -> Iterator[LocalKafka]:
    """:func:`start_clusters` in a throwaway directory; stopped and removed on the way out."""
    run_dir = Path(tempfile.mkdtemp(prefix=prefix))
    kafka = start_clusters(run_dir, names)
    try:
        yield kafka
    finally:
        kafka.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


def create_topic(bootstrap: str, partitions: int, name: str | None = None) -> str:
    name = name or f"bench-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
    wait_for_leaders(admin, bootstrap, name, partitions)
    return name


def wait_for_leaders(admin: AdminClient, bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Until every partition of ``topic`` has a leader: nobody's clock starts before that."""
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 for p in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} not ready on {bootstrap}")
        _pause.wait(0.1)


def send(producer: Any, n: int, topic: str, **record: Any) -> None:
    """Produce the ``n``-th record of a stream, waiting while the producer's queue is full; serve its
    callbacks every 10,000 records."""
    while True:
        try:
            producer.produce(topic, **record)
            break
        except BufferError:
            producer.poll(0.05)
    if n % 10000 == 0:
        producer.poll(0)


def prefill(bootstrap: str, topic: str, case: Case, *, codec: str = "none",
            value_of: Callable[[int], bytes] | None = None) -> float:
    """Write the case's records once; returns the seconds it took (not part of any contender's time).

    By default every value is the same ``case.size`` random bytes, written uncompressed: what the
    copy matrix has always measured. ``codec`` and ``value_of`` (record number to value) give a
    compressed, compressible source (benchmarks.compression).
    """
    started = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "compression.type": codec, "acks": "all", "enable.idempotence": True})
    value = os.urandom(case.size)
    for i in range(case.records):
        send(producer, i, topic, value=value if value_of is None else value_of(i), key=b"%016d" % i,
             partition=i % case.partitions, headers=[("bench", b"1")])
    if producer.flush(120):
        raise RuntimeError(f"prefill of {topic}: not every record was acknowledged")
    return time.monotonic() - started


def warm_up(*bootstraps: str) -> None:
    """Create each cluster's internal topics before any clock runs.

    The first transactional producer creates ``__transaction_state`` and the first
    group commit ``__consumer_offsets`` (50 partitions each); whichever contender
    came first would otherwise pay for that. One transaction that also commits a
    group offset creates both.
    """
    for bootstrap in bootstraps:
        topic = create_topic(bootstrap, 1, name=f"bench-warm-up-{uuid.uuid4().hex[:6]}")
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-warm-up-{uuid.uuid4().hex}"})
        group = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-warm-up"})
        try:
            producer.init_transactions(60)
            producer.begin_transaction()
            producer.produce(topic, b"warm-up")
            producer.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], group.consumer_group_metadata(), 60)
            producer.commit_transaction(60)
        finally:
            group.close()


def committed_count(bootstrap: str, topic: str, partitions: int) -> int:
    """Committed (read_committed) records on the target: last stable minus earliest, summed."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, isolation_level=IsolationLevel.READ_COMMITTED)
    lows = admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps})
    return sum(ends[tp].result(30).offset - lows[tp].result(30).offset for tp in tps)


def records_on(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> int:
    """Records a read_committed consumer actually reads (transaction markers excluded): the exact count."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-count-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    done, count = set(), 0
    deadline = time.monotonic() + timeout
    try:
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"counting {topic}: {len(done)} of {partitions} partitions read to the end")
            for msg in consumer.consume(1000, 0.2):
                if msg.error():
                    done.add(msg.partition())
                else:
                    count += 1
    finally:
        consumer.close()
    return count


def wait_for_records(bootstrap: str, topic: str, partitions: int, expected: int, started: float,
                     timeout: float = 900.0) -> float:
    """Seconds from ``started`` until the target holds at least ``expected`` committed offsets."""
    deadline = time.monotonic() + timeout
    while committed_count(bootstrap, topic, partitions) < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: fewer than {expected} records after {timeout:.0f}s")
        _pause.wait(0.05)
    return time.monotonic() - started
