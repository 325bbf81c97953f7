"""The archive's Parquet schema and the record type it round-trips.

Everything a Kafka consumer could see of a message is kept byte for byte (key,
value, headers in order, timestamp and its type, offset), so a restore or a
backfill from the archive produces what the topic had. ``origin_*`` says where
the message was *first* produced: the ``mirror.origin`` provenance header of a
mirrored copy, or the archived partition itself for a message produced there.
With it, archives of different clusters can be joined and deduplicated without
parsing headers, and a restore can keep provenance intact.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from mirrorflow import formats, provenance

#: Bumped when the schema changes incompatibly (mirrorflow.formats); stored in each file's metadata under FORMAT_KEY.
FORMAT_VERSION = str(formats.FORMATS["archive"].version)
FORMAT_KEY = b"mirrorflow.archive.format"

HEADER_TYPE = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])

SCHEMA = pa.schema([
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),  # milliseconds; -1 when Kafka had none
    pa.field("timestamp_type", pa.int8(), nullable=False),  # 0 none, 1 CreateTime, 2 LogAppendTime
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("headers", pa.list_(pa.field("item", HEADER_TYPE, nullable=False)), nullable=False),
    pa.field("origin_cluster", pa.string(), nullable=False),
    pa.field("origin_topic", pa.string(), nullable=False),
    pa.field("origin_partition", pa.int32(), nullable=False),
    pa.field("origin_offset", pa.int64(), nullable=False),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
])


@dataclass(frozen=True)
class ArchivedRecord:
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    #: In the order the producer sent them; a value may be ``None``.
    headers: list[tuple[str, bytes | None]]
    origin: provenance.Origin


def to_table(records: Sequence[ArchivedRecord], topic: str, partition: int,
             metadata: dict[str, str] | None = None) -> pa.Table:
    """One Parquet-ready table of ``records`` (all of one topic-partition)."""
    n = len(records)
    origins = [r.origin for r in records]
    columns = [
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp for r in records], pa.int64()),
        pa.array([r.timestamp_type for r in records], pa.int8()),
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], SCHEMA.field("headers").type),
        pa.array([o.cluster for o in origins], pa.string()),
        pa.array([o.topic for o in origins], pa.string()),
        pa.array([o.partition for o in origins], pa.int32()),
        pa.array([o.offset for o in origins], pa.int64()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
    ]
    meta = {FORMAT_KEY.decode(): FORMAT_VERSION, **(metadata or {})}
    return pa.Table.from_arrays(columns, schema=SCHEMA.with_metadata(meta))


def from_table(table: pa.Table) -> Iterator[ArchivedRecord]:
    """The records of a table written by :func:`to_table`, in its row order."""
    data = table.select([f.name for f in SCHEMA]).to_pydict()
    for i in range(table.num_rows):
        yield ArchivedRecord(
            offset=data["offset"][i],
            timestamp=data["timestamp"][i],
            timestamp_type=data["timestamp_type"][i],
            key=data["key"][i],
            value=data["value"][i],
            headers=[(h["key"], h["value"]) for h in data["headers"][i]],
            origin=provenance.Origin(data["origin_cluster"][i], data["origin_topic"][i],
                                     data["origin_partition"][i], data["origin_offset"][i]),
        )
