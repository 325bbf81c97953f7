"""Copies are stored about as compactly as their compressed source, and sized as the broker sizes them (real brokers).

The target topics keep Kafka's ``compression.type=producer``, so what the copier's
producer sends is what the target stores (docs/topics.md, "Compression of copies").
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.integration.kafka_io import read_all

pytestmark = pytest.mark.kafka

LIMIT = 1_000_000


def _orders(n: int, seed: int = 44) -> list[bytes]:
    """JSON order records as a shop writes them: the same fields, varying ids, amounts and items."""
    rng = random.Random(seed)
    skus = [f"SKU-{rng.randrange(10**6):06d}" for _ in range(200)]
    return [json.dumps({
        "order_id": f"o-{i:09d}", "customer_id": f"c-{rng.randrange(10**5):05d}", "status": "CREATED",
        "currency": "EUR", "channel": rng.choice(["web", "app", "store"]), "created_at": 1_764_000_000_000 + i * 37,
        "items": [{"sku": rng.choice(skus), "quantity": rng.randint(1, 5), "unit_price": rng.randint(99, 99_999) / 100}
                  for _ in range(rng.randint(1, 4))],
        "shipping": {"country": rng.choice(["DE", "FR", "NL", "IT"]), "method": "standard"},
    }).encode() for i in range(n)]


def _produce(bootstrap: str, topic: str, values: list[bytes], codec: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                         "batch.size": 1_000_000, "message.max.bytes": 10_000_000})
    errors: list = []
    for i, value in enumerate(values):
        producer.produce(topic, value, key=b"%09d" % i, partition=0,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and errors == []


def _log_bytes(data_dir: Path, topic: str) -> int:
    """Bytes of the partition's log segments on disk (the indexes are preallocated, so left out)."""
    return sum(f.stat().st_size for f in (data_dir / f"{topic}-0").glob("*.log"))


def _copy(kafka_clusters, topic: str, end: int, target_config: dict | None = None, **task_args):
    from mirrorflow.copy.engine.partition import copy_partition
    from mirrorflow.copy.task import PartitionTask
    from mirrorflow.kafka.config import ClusterClient

    task = PartitionTask(link_id="c1.L1", level=1, source="c1", target="c2", topic=topic, partition=0,
                         end_offset=end, **task_args)
    return copy_partition(task, ClusterClient("c1", {"bootstrap.servers": kafka_clusters["c1"].bootstrap}),
                          ClusterClient("c2", {"bootstrap.servers": kafka_clusters["c2"].bootstrap,
                                               **(target_config or {})}))


def test_a_zstd_sources_copies_take_at_most_one_and_a_half_times_its_bytes(kafka_clusters, make_topic):
    topic = make_topic("c1")
    make_topic("c2", name=topic)
    orders = _orders(20_000)
    _produce(kafka_clusters["c1"].bootstrap, topic, orders, "zstd")
    result = _copy(kafka_clusters, topic, len(orders))
    assert result.ok and result.copied == len(orders), result.error
    source, copies = _log_bytes(kafka_clusters["c1"].data_dir, topic), _log_bytes(kafka_clusters["c2"].data_dir, topic)
    uncompressed = sum(map(len, orders))
    assert source < uncompressed / 3, (source, uncompressed)  # the data is compressible: the check means something
    assert copies <= 1.5 * source, f"copies take {copies:,} bytes on c2, {copies / source:.1f} times the source's"


def test_a_record_over_the_targets_limit_only_uncompressed_is_copied(kafka_clusters, make_topic):
    topic = make_topic("c1")
    make_topic("c2", name=topic, config={"max.message.bytes": str(LIMIT)})
    big = json.dumps([json.loads(o) for o in _orders(12_000, seed=7)]).encode()  # about 3 MB, some 300 KB as zstd
    assert len(big) > 2 * LIMIT
    values = [b"before", big, b"after"]
    _produce(kafka_clusters["c1"].bootstrap, topic, values, "zstd")
    result = _copy(kafka_clusters, topic, 3, max_message_bytes=LIMIT)
    assert result.ok and result.copied == 3, result.error
    assert [r.value for r in read_all(kafka_clusters["c2"].bootstrap, topic, 1)] == values


def test_a_record_too_large_even_compressed_stops_its_partition_by_name(kafka_clusters, make_topic):
    topic = make_topic("c1", config={"max.message.bytes": str(5 * LIMIT)})
    make_topic("c2", name=topic, config={"max.message.bytes": str(LIMIT)})
    incompressible = random.Random(3).randbytes(2 * LIMIT)
    _produce(kafka_clusters["c1"].bootstrap, topic, [b"small", incompressible, b"after"], "zstd")
    result = _copy(kafka_clusters, topic, 3, max_message_bytes=LIMIT, source_max_message_bytes=5 * LIMIT)
    assert (result.error_offset, result.next_offset, result.copied) == (1, 1, 1)
    assert result.error is not None and result.error.startswith(
        f"the copy of the record at c1 {topic}[0] offset 1 is too large for c2's {topic}, which allows 1,000,000 "
        f"bytes (max.message.bytes); the source topic on c1 allows 5,000,000."), result.error
    assert [r.value for r in read_all(kafka_clusters["c2"].bootstrap, topic, 1)] == [b"small"]
