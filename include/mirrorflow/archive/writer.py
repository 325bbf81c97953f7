"""Archive one partition range to S3: what a Spark executor runs per unit of work.

Read ``[start, end)`` of one source partition with a ``read_committed``
consumer (aborted records never reach the archive), group the records by the
UTC date of their timestamps and write each date's records as Parquet at
``(date, start)`` (see :mod:`mirrorflow.archive.layout`).

Why this is safe to repeat: Kafka data below the last stable offset never
changes, and a repeated run starts at the same ``start`` (the archive's
progress only moves after a run's manifest is written). It reads a superset of
the same records, builds the same keys, and S3's PUT replaces each object
whole. So a run killed after uploading some objects, and run again, leaves no
duplicate row and no half object behind.

The writer never commits anything to Kafka: the archive's own progress object
is the only position, written by the driver (:mod:`mirrorflow.archive.job`).
"""

from __future__ import annotations

import io
import logging
import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.parquet as pq
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition

from mirrorflow import provenance
from mirrorflow.archive import layout
from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.archive.records import ArchivedRecord, to_table
from mirrorflow.internal_names import INTERNAL_TOPIC_PREFIX
from mirrorflow.kafka.config import CONSUME_WAIT_S, ClusterClient
from mirrorflow.progress import note

log = logging.getLogger(__name__)

#: Rows of one date kept in memory before they are written as an object: bounds an
#: executor's memory on a busy partition (keys are still deterministic, see ``_key_offset``).
DEFAULT_ROWS_PER_OBJECT = 100_000
PARQUET_CONTENT_TYPE = "application/vnd.apache.parquet"


def reader_group(cluster: str) -> str:
    """The consumer's ``group.id`` (librdkafka wants one); it never commits or joins a group."""
    return f"{INTERNAL_TOPIC_PREFIX}.archive.{cluster}"


@dataclass(frozen=True)
class ArchiveTask:
    """One partition range planned by the driver."""

    cluster: str
    topic: str
    partition: int
    #: Where the archive's progress says to continue (or the source's earliest offset).
    start: int
    #: Exclusive: the last stable offset when the run was planned, capped by the per-run limit.
    end: int
    run_id: str = ""
    #: At most this many records this run (offsets taken by transaction markers are free).
    max_records: int | None = None
    rows_per_object: int = DEFAULT_ROWS_PER_OBJECT


@dataclass
class ArchivePartitionResult:
    cluster: str
    topic: str
    partition: int
    start: int
    end: int
    #: The offset after the last one read, transaction markers included: where the next run starts.
    next: int
    count: int = 0
    bytes: int = 0
    #: CRC-32 over each record's key then value, in offset order (as the copy audit computes it).
    checksum: int = 0
    #: ``{key, date, rows, first, last, bytes}`` per object written, in write order.
    objects: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Objects:
    """Per-date buffers and the upload of full ones."""

    def __init__(self, task: ArchiveTask, location: ArchiveLocation, s3: Any, result: ArchivePartitionResult):
        self.task, self.location, self.s3, self.result = task, location, s3, result
        self.buffers: dict[str, list[ArchivedRecord]] = {}
        self.started_dates: set[str] = set()

    def add(self, day: str, record: ArchivedRecord) -> None:
        rows = self.buffers.setdefault(day, [])
        rows.append(record)
        if len(rows) >= self.task.rows_per_object:
            self.flush(day)

    def _key_offset(self, day: str, rows: list[ArchivedRecord]) -> int:
        """The run's start for a date's first object, the first row's offset for any later one.

        Both depend only on ``start`` and the (immutable) records after it, so a
        repeated run builds the same keys.
        """
        return self.task.start if day not in self.started_dates else rows[0].offset

    def flush(self, day: str) -> None:
        rows = self.buffers.pop(day, [])
        if not rows:
            return
        task = self.task
        key = layout.data_key(self.location.prefix, task.cluster, task.topic, task.partition, day,
                              self._key_offset(day, rows))
        self.started_dates.add(day)
        table = to_table(rows, task.topic, task.partition, metadata={
            "mirrorflow.archive.cluster": task.cluster,
            "mirrorflow.archive.run_id": task.run_id,
            "mirrorflow.archive.start": str(task.start),
        })
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        body = buf.getvalue()
        self.s3.put_object(Bucket=self.location.bucket, Key=key, Body=body, ContentType=PARQUET_CONTENT_TYPE)
        self.result.objects.append({"key": key, "date": day, "rows": len(rows), "first": rows[0].offset,
                                    "last": rows[-1].offset, "bytes": len(body)})

    def flush_all(self) -> None:
        for day in sorted(self.buffers):
            self.flush(day)


def archive_partition(task: ArchiveTask, source: ClusterClient, location: ArchiveLocation, *, s3: Any = None,
                      idle_timeout: float = 30.0) -> dict[str, Any]:
    """Archive ``task``'s range; the result as a dict. Never raises: a failure is the result's ``error``.

    On an error the objects already uploaded are listed in the result but are
    not part of the archive: the driver leaves the progress where it was, and
    the next run overwrites them.
    """
    started = time.monotonic()
    result = ArchivePartitionResult(task.cluster, task.topic, task.partition, task.start, task.end, next=task.start)
    consumer: Consumer | None = None
    try:
        s3 = s3 if s3 is not None else location.client()
        # auto.offset.reset=error: if retention deleted `start` after the driver planned the run,
        # fail this partition loudly (the next run records the gap) instead of silently skipping.
        consumer = Consumer(source.consumer(reader_group(task.cluster), **{
            "enable.partition.eof": True, "auto.offset.reset": "error"}))
        objects = _Objects(task, location, s3, result)
        if task.start < task.end:
            _read(task, consumer, objects, result, idle_timeout)
        objects.flush_all()
    except Exception as exc:  # one partition's failure must not end the Spark task of the others
        result.error = _describe(exc, task)
        log.error("archive %s %s[%d] from %d: %s", task.cluster, task.topic, task.partition, task.start,
                  result.error)
    finally:
        if consumer is not None:
            consumer.close()
    result.duration_s = round(time.monotonic() - started, 3)
    return result.to_dict()


def _read(task: ArchiveTask, consumer: Consumer, objects: _Objects, result: ArchivePartitionResult,
          idle_timeout: float) -> None:
    consumer.assign([TopicPartition(task.topic, task.partition, task.start)])
    position, end = task.start, task.end
    crc, count, size = 0, 0, 0
    noted = (position, size)  # what progress was told (once per consumed batch, mirrorflow.progress)
    last_progress = time.monotonic()
    while position < end and (task.max_records is None or count < task.max_records):
        if noted != (position, size):
            note(position - noted[0], size - noted[1])
            noted = (position, size)
        # A short wait: consume() holds a partial batch until its timeout, and the last
        # batch of every range is partial.
        msgs = consumer.consume(num_messages=500, timeout=CONSUME_WAIT_S)
        if not msgs:
            if time.monotonic() - last_progress > idle_timeout:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                                f"no progress reading for {idle_timeout:.0f}s at offset {position} "
                                                f"(planned end {end})"))
            continue
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= end:  # only transaction markers or aborted records remain before end
                        position = end
                    continue
                raise KafkaException(err)
            offset = msg.offset()
            if offset < position:
                continue  # re-delivered after a reconnect: already archived in this run
            if offset >= end:
                position = end
                break
            last_progress = time.monotonic()
            ts_type, ts = msg.timestamp()
            if ts_type == TIMESTAMP_NOT_AVAILABLE:
                ts = -1
            headers = list(msg.headers() or [])
            key, value = msg.key(), msg.value()
            record = ArchivedRecord(offset, ts, ts_type, key, value, headers,
                                    provenance.origin_of(headers, task.cluster, task.topic, task.partition, offset))
            objects.add(layout.utc_date(ts), record)
            crc = zlib.crc32(value or b"", zlib.crc32(key or b"", crc))
            count += 1
            size += len(key or b"") + len(value or b"")
            position = offset + 1
            if task.max_records is not None and count >= task.max_records:
                break
    note(position - noted[0], size - noted[1])
    result.next, result.count, result.bytes, result.checksum = position, count, size, crc


def _describe(exc: Exception, task: ArchiveTask) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err = exc.args[0]
        if err.code() == KafkaError._AUTO_OFFSET_RESET:
            return (f"offset {task.start} of {task.topic}[{task.partition}] is no longer on cluster {task.cluster} "
                    f"(deleted after this run was planned); the next run records the gap ({err.str()})")
        return f"{err.name()}: {err.str()} (cluster {task.cluster})"
    return f"{type(exc).__name__}: {exc}"
