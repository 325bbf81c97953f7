"""The client-side ceiling: one process, a confluent-kafka consumer feeding a producer, nothing else.

No copy flags, no provenance, no transactions, no Spark: read every partition of
the source topic from the beginning and produce each record to the same
partition of the target (idempotent producer, ``acks=all``), until every
record is acknowledged. What mirrorflow's copier does per record on top of this
is the cost the benchmark makes visible.

The producer reports failed deliveries only (one callback per failure, none per
success, as mirrorflow's copier does): a copy the target refused is counted and
fails the run, naming the error, where it used to vanish. The 2026-11-23g record
shows why: one raw-loop run had 3 records missing on the target and nothing
said why.

Its consumer looks again after 10 ms when its queue is full (``fetch.queue.backoff.ms``),
as every mirrorflow consumer does since 2026-11-30: with librdkafka's 1 s default, a
one-partition copy of 100 B records stood still most of the time (docs/benchmarks.md,
"Small records"), so records before that date measured that stall, not the loop.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition


def raw_copy(source: str, target: str, topic: str, partitions: int, records: int) -> dict:
    started = time.monotonic()
    consumer = Consumer({"bootstrap.servers": source, "group.id": "bench-raw", "enable.auto.commit": False,
                         "enable.partition.eof": True, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760,
                         "fetch.queue.backoff.ms": 10})
    producer = Producer({"bootstrap.servers": target, "linger.ms": 5, "batch.size": 1 << 20, "acks": "all",
                         "enable.idempotence": True, "delivery.report.only.error": True})
    failed: list[str] = []

    def refused(err, msg) -> None:
        if err is not None:
            failed.append(f"{msg.topic()}[{msg.partition()}]: {err}")
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    copied, at_end = 0, set()
    try:
        while copied < records or len(at_end) < partitions:
            for msg in consumer.consume(1000, 0.1):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise RuntimeError(f"raw loop: {err}")
                while True:
                    try:
                        producer.produce(topic, value=msg.value(), key=msg.key(), headers=msg.headers(),
                                         partition=msg.partition(), timestamp=msg.timestamp()[1],
                                         on_delivery=refused)
                        break
                    except BufferError:
                        producer.poll(0.01)
                copied += 1
            producer.poll(0)
        if producer.flush(300):
            raise RuntimeError("raw loop: not every copy was acknowledged")
        if failed:
            raise RuntimeError(f"raw loop: the target refused {len(failed)} copies, first {failed[0]}")
    finally:
        consumer.close()
    return {"seconds": time.monotonic() - started, "records": copied}
