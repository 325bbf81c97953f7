"""What a target already holds of a source, read from the provenance stamped on its copies.

A copy carries its origin (cluster, topic, partition, offset) in a header, not
in its offset, so finding the copies of a source partition means reading target
partitions whole. Three decisions need that: where a forced target switch cuts
(:mod:`mirrorflow.actions.switch`), whether a link without a checkpoint would copy
again what its target holds (the planner), and what an operator's
``resume_from`` would drop or repeat and where a ``rewind`` after a truncated
source resumes (:mod:`mirrorflow.actions.gap`). They share this one reader.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from confluent_kafka import TopicPartition

from mirrorflow import provenance
from mirrorflow.errors import ReadStalled
from mirrorflow.internal_names import COPY_SCAN_GROUP as SCAN_GROUP
from mirrorflow.kafka import ClusterClient, RangeReader, read_headers

#: Reading a target partition made no progress within the timeout (the bounded reader's stall).
ScanStalled = ReadStalled


class CopyScanner:
    """One ``read_committed`` consumer on a cluster, reading partitions (whole or a range) for their origins."""

    def __init__(self, target: ClusterClient) -> None:
        self.target = target
        self._reader = RangeReader.open(target, SCAN_GROUP, doing="scan")
        self._consumer = self._reader.consumer

    def __enter__(self) -> CopyScanner:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._reader.close()

    def earliest(self, topic: str, partition: int, timeout: float) -> int:
        """The partition's first offset (above 0: retention or a deletion removed its first records)."""
        low, _ = self._consumer.get_watermark_offsets(TopicPartition(self.target.physical(topic), partition),
                                                      timeout=timeout, cached=False)
        return int(low)

    def origins(self, topic: str, partition: int, timeout: float) -> Iterator[provenance.Origin | None]:
        """The origin of every record of ``topic[partition]`` on the target, first to last (``None``: none stamped).

        Fails as :class:`ScanStalled` when no record arrives for ``timeout`` seconds, and as
        :class:`~mirrorflow.errors.OffsetGone` when records are deleted under the scan.
        """
        for origin, _ in self.records(topic, partition, timeout):
            yield origin

    def records(self, topic: str, partition: int, timeout: float, *, first: int = 0,
                end: int | None = None) -> Iterator[tuple[provenance.Origin | None, Any]]:
        """The records of ``topic[partition]`` in ``[first, end)`` (default: all) with their origins, in order."""
        for msg in self.messages(topic, partition, timeout, first=first, end=end):
            yield provenance.find(read_headers(msg, self.target.name), topic, partition), msg

    def messages(self, topic: str, partition: int, timeout: float, *, first: int = 0,
                 end: int | None = None) -> Iterator[Any]:
        """The records of ``topic[partition]`` in ``[first, end)`` (default: all), in order, as they come."""
        name = self.target.physical(topic)  # topics are logical names here, as everywhere above the client layer
        low, high = self._consumer.get_watermark_offsets(TopicPartition(name, partition), timeout=timeout,
                                                         cached=False)
        start, stop = max(low, first), high if end is None else min(high, end)
        yield from self._reader.range(name, partition, start, stop, timeout=timeout)


    def origins_of(self, topic: str, partitions: list[int], timeout: float,
                   on_error: Callable[[tuple[str, int], Exception], None]
                   ) -> Iterator[tuple[int, provenance.Origin | None]]:
        """``(partition, origin)`` of every record of ``topic``'s ``partitions``, all read at once, each in order.

        A partition whose read fails goes to ``on_error`` and is not read further; the others go on.
        """
        name = self.target.physical(topic)
        ranges = {}
        for partition in partitions:
            low, high = self._consumer.get_watermark_offsets(TopicPartition(name, partition), timeout=timeout,
                                                             cached=False)
            if low < high:
                ranges[(name, partition)] = (low, high)
        for msg in self._reader.read(ranges, timeout=timeout, on_error=on_error):
            yield msg.partition(), provenance.find(read_headers(msg, self.target.name), topic, msg.partition())


@dataclass(frozen=True)
class Copies:
    """Copies on a target whose origin is one source partition: how many in the range asked for, the highest origin."""

    count: int
    highest: int | None


def find_copies(target: ClusterClient, source: str, topic: str, partition: int, timeout: float, *,
                first: int = 0, end: int | None = None) -> Copies:
    """Copies on ``target`` (same topic and partition) whose origin is ``source``'s ``topic[partition]``.

    ``count`` is of those with an origin offset in ``[first, end)`` (``end=None``: no bound),
    ``highest`` the highest origin offset of all of them.
    """
    count, highest = 0, None
    with CopyScanner(target) as scanner:
        for origin in scanner.origins(topic, partition, timeout):
            if origin is None or (origin.cluster, origin.topic, origin.partition) != (source, topic, partition):
                continue
            highest = origin.offset if highest is None else max(highest, origin.offset)
            count += first <= origin.offset and (end is None or origin.offset < end)
    return Copies(count, highest)


def copies_in_partitions(target: ClusterClient, source: str, topic: str, partitions: list[int],
                         timeout: float) -> dict[int, Copies]:
    """:func:`find_copies` (whole partitions) of several partitions of ``topic``, read side by side.

    One consumer for all of them instead of one per partition: a link's first run finds
    every partition without a checkpoint here (a new link at a higher level: each
    partition holds copies from elsewhere). A partition whose read failed is left out, so
    that its caller asks :func:`find_copies` alone, which names the failure.
    """
    found: dict[int, tuple[int, int | None]] = {p: (0, None) for p in partitions}
    failed: set[int] = set()
    with CopyScanner(target) as scanner:
        for partition, origin in scanner.origins_of(topic, partitions, timeout,
                                                    lambda key, _: failed.add(key[1])):
            if origin is None or (origin.cluster, origin.topic, origin.partition) != (source, topic, partition):
                continue
            count, highest = found[partition]
            found[partition] = (count + 1, origin.offset if highest is None else max(highest, origin.offset))
    return {p: Copies(count, highest) for p, (count, highest) in found.items() if p not in failed}


def copy_contents(target: ClusterClient, source: str, topic: str, partition: int, first: int, end: int,
                  timeout: float) -> dict[int, int]:
    """Origin offset -> crc32 of key and value, of the copies on ``target`` of ``source``'s ``topic[partition]``
    with an origin offset in ``[first, end)`` (to compare them with the source's records)."""
    out: dict[int, int] = {}
    with CopyScanner(target) as scanner:
        for origin, msg in scanner.records(topic, partition, timeout):
            if (origin is not None and (origin.cluster, origin.topic, origin.partition) == (source, topic, partition)
                    and first <= origin.offset < end):
                out[origin.offset] = content(msg.key(), msg.value())
    return out


def content(key: bytes | None, value: bytes | None) -> int:
    """What a copy keeps of its source record exactly, whatever the target's timestamp type: key and value."""
    return zlib.crc32(value or b"", zlib.crc32(key or b""))
