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
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE

from mirrorflow import provenance
from mirrorflow.archive import layout
from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.archive.records import ArchivedRecord, to_table
from mirrorflow.errors import KafkaOperationError, OffsetGone
from mirrorflow.internal_names import archive_reader_group as reader_group
from mirrorflow.kafka import ClusterClient, RangeReader, read_headers
from mirrorflow.progress import note

log = logging.getLogger(__name__)

#: Rows of one date kept in memory before they are written as an object: bounds an
#: executor's memory on a busy partition (keys are still deterministic, see ``_key_offset``).
DEFAULT_ROWS_PER_OBJECT = 100_000
PARQUET_CONTENT_TYPE = "application/vnd.apache.parquet"


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
    #: The topic's name on the cluster when it renames it (``topic`` is the logical name, the archive's paths).
    name: str | None = None


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
    reader: RangeReader | None = None
    try:
        s3 = s3 if s3 is not None else location.client()
        # A bounded read never jumps: if retention deleted records after the driver planned the run,
        # this partition fails loudly (the next run records the gap) instead of skipping them.
        reader = RangeReader.open(source, reader_group(task.cluster), timeout=idle_timeout, batch=500)
        objects = _Objects(task, location, s3, result)
        if task.start < task.end:
            _read(task, reader, objects, result)
        objects.flush_all()
    except Exception as exc:  # one partition's failure must not end the Spark task of the others
        result.error = _describe(exc, task)
        log.error("archive %s %s[%d] from %d: %s", task.cluster, task.topic, task.partition, task.start,
                  result.error)
    finally:
        if reader is not None:
            reader.close()
    result.duration_s = round(time.monotonic() - started, 3)
    return result.to_dict()


def _read(task: ArchiveTask, reader: RangeReader, objects: _Objects, result: ArchivePartitionResult) -> None:
    crc, count, size = 0, 0, 0
    position, full = task.start, task.max_records is not None and task.max_records <= 0
    noted = (position, size)  # what progress was told (once per consumed batch, mirrorflow.progress)
    on_cluster = task.name or task.topic  # what the reader reads; the archive's paths keep the logical name
    batches = reader.batches({(on_cluster, task.partition): (task.start, task.end)})
    while not full and (batch := next(batches, None)) is not None:
        for msg in batch:
            offset = msg.offset()
            ts_type, ts = msg.timestamp()
            if ts_type == TIMESTAMP_NOT_AVAILABLE:
                ts = -1
            headers = list(read_headers(msg, task.cluster) or [])
            key, value = msg.key(), msg.value()
            record = ArchivedRecord(offset, ts, ts_type, key, value, headers,
                                    provenance.origin_of(headers, task.cluster, task.topic, task.partition, offset))
            objects.add(layout.utc_date(ts), record)
            crc = zlib.crc32(value or b"", zlib.crc32(key or b"", crc))
            count += 1
            size += len(key or b"") + len(value or b"")
            position = offset + 1
            full = task.max_records is not None and count >= task.max_records
            if full:
                break
        note(position - noted[0], size - noted[1])
        noted = (position, size)
    if not full:  # read to the end: the range's end, transaction markers after the last record included
        position = reader.position(on_cluster, task.partition)
    note(position - noted[0], size - noted[1])
    result.next, result.count, result.bytes, result.checksum = position, count, size, crc


def _describe(exc: Exception, task: ArchiveTask) -> str:
    if isinstance(exc, OffsetGone):
        return (f"offset {exc.offset} of {task.topic}[{task.partition}] is no longer on cluster {task.cluster} "
                f"(deleted after this run was planned); the next run records the gap ({exc.detail})")
    if isinstance(exc, KafkaOperationError):
        return f"{exc.code_name}: {exc.detail} (cluster {task.cluster})"
    return f"{type(exc).__name__}: {exc}"
