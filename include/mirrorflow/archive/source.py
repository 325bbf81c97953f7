"""The S3 archive as a message source for the copier: restore what the peers no longer hold.

The copier (:func:`mirrorflow.copy.engine.partition.copy_partition`) reads a source
through a tiny slice of confluent-kafka's ``Consumer`` interface (``assign``,
``consume``), and imports this module only for a restore (onboarding).
:class:`ArchiveSource` offers the same slice over the archived Parquet rows
of one partition, so restored records go through exactly the same
transactions, checkpoint, flags and provenance as records read from Kafka:
the seam between archive and Kafka is one offset in the same checkpoint,
with nothing to reconcile.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from confluent_kafka import KafkaError

from mirrorflow.archive.errors import ArchiveError
from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.archive.reader import coverage, iter_archived


class ArchivedMessage:
    """One archived record, looking like a consumed ``Message``."""

    __slots__ = ("_rec", "_topic", "_partition")

    def __init__(self, rec: Any, topic: str, partition: int) -> None:
        self._rec, self._topic, self._partition = rec, topic, partition

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._rec.offset

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def key(self) -> bytes | None:
        return self._rec.key

    def value(self) -> bytes | None:
        return self._rec.value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return list(self._rec.headers) or None

    def timestamp(self) -> tuple[int, int]:
        return self._rec.timestamp_type, self._rec.timestamp


class EndOfRange:
    """The end of the restored range, like Kafka's partition-EOF event at ``end``."""

    def __init__(self, end: int) -> None:
        self._end = end

    def error(self) -> KafkaError:
        return KafkaError(KafkaError._PARTITION_EOF)

    def offset(self) -> int:
        return self._end


class ArchiveSource:
    """Archived rows of one partition of one cluster, ``[start, end)``, in offset order."""

    def __init__(self, restore: Mapping[str, Any], cluster: str, topic: str, partition: int, start: int,
                 end: int) -> None:
        self.location = ArchiveLocation.from_dict(dict(restore["location"]))
        self.cluster, self.topic, self.partition = cluster, topic, partition
        self.start, self.end = start, end
        self._rows: Iterator[Any] | None = None
        self._done = False

    def assign(self, partitions: list[Any]) -> None:
        """Start at ``partitions[0].offset``; :class:`ArchiveError` unless the archive holds every offset to the end.

        The end-of-range event says every offset up to ``end`` was read, so a hole
        would be stepped over in silence: the planners check coverage first, and
        this checks it again where the records are read.
        """
        start = partitions[0].offset
        at = start
        for first, nxt in coverage(self.location, self.cluster, self.topic, self.partition):
            if first <= at < nxt:
                at = nxt
        if at < self.end:
            raise ArchiveError(f"the archive of {self.cluster} does not hold offset {at} of {self.topic}"
                               f"[{self.partition}] (restoring {start}..{self.end - 1}); nothing restored past it")
        self._rows = iter_archived(self.location, self.cluster, self.topic, self.partition, start, self.end)
        self._done = False

    def consume(self, num_messages: int = 500, timeout: float = 1.0) -> list[Any]:
        if self._rows is None:
            raise RuntimeError("ArchiveSource.consume before assign")
        out: list[Any] = []
        if self._done:
            return out
        for rec in self._rows:
            out.append(ArchivedMessage(rec, self.topic, self.partition))
            if len(out) >= num_messages:
                return out
        out.append(EndOfRange(self.end))
        self._done = True
        return out

    def close(self) -> None:
        self._rows = None
