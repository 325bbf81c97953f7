"""Healing a retention gap from *other* clusters' archives, by provenance.

When the source's own archive does not hold a gap (:mod:`mirrorflow.copy.heal.archive`),
the messages the link would have copied from it may still be in another
cluster's archive: every message reaches every cluster, and every archived row
names its origin. What is missing is known per origin, not per source offset:

- the link passes on its source's own messages and those of some other origins
  (the ones that reach its source through higher levels). Along one path, each
  origin partition arrives in order and once;
- so per origin, the gap held exactly the origin offsets between the last one
  the target holds through this link (``after``: read from the target's copies,
  whose flags say which link brought them) and the first one the source still
  holds past the gap (``before``; for the source's own messages, the gap's end);
- an archive proves it holds all of them when one contiguous range of it holds
  a row of that origin at or below ``after`` and one at or above ``before``
  (an origin's own archive: when it covers the offsets in between).

An origin the target holds nothing of, or the source holds nothing of past the
gap, cannot be bounded: the restore is refused naming it, as it is when no
archive proves a range. Copies on the target from other links of the same level
(several clusters sending to one leaf) are told apart by the source: an origin
it holds past the gap with a lower level's flag never passes through this link.
The restored messages carry the flags the link's earlier
copies of the same origin carry and their origin stamp, and go through the
copier in ONE transaction with the checkpoint moving to the gap's end, so a
killed restore leaves nothing and the next one computes the same set.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mirrorflow import copyflags, provenance
from mirrorflow.copy.state.copies import CopyScanner
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import ClusterClient, read_headers

log = logging.getLogger(__name__)

#: A restore by provenance is one transaction (see the module): at most this many messages.
MAX_MESSAGES = 100_000


class NotProven(MirrorflowError):
    """No archive is proven to hold what the gap held; the message names what is missing."""


@dataclass(frozen=True)
class Needed:
    """One origin's part of the gap: origin offsets strictly between ``after`` and ``before``."""

    origin: str
    after: int
    before: int
    #: The flags the message carried on the link's source (the link adds its own bit).
    flags_on_source: int

    def __str__(self) -> str:
        return f"{self.origin}'s messages after origin offset {self.after} and before {self.before}"


@dataclass
class Found:
    """The rows an archive holds for one :class:`Needed` and which archive proved it."""

    needed: Needed
    cluster: str
    rows: list[Any] = field(default_factory=list)


def needed_origins(source: ClusterClient, target: ClusterClient, level: int, topic: str, partition: int,
                   position: int, end: int, timeout: float) -> list[Needed]:
    """Per origin the link passes on: what the gap ``[position, end)`` of its source held (see the module)."""
    own, lower = copyflags.bit(level), copyflags.mask(level)
    after: dict[str, int] = {}
    flags_of: dict[str, int] = {}
    with CopyScanner(target) as scanner:
        for origin, msg in scanner.records(topic, partition, timeout):
            if origin is None or (origin.topic, origin.partition) != (topic, partition):
                continue
            flags, malformed, _, _ = copyflags.read_flags(read_headers(msg))
            if malformed or flags & lower != own:
                continue  # not brought by this level's link
            if origin.offset > after.get(origin.cluster, -1):
                after[origin.cluster], flags_of[origin.cluster] = origin.offset, flags & ~own
    before: dict[str, int] = {source.name: end}  # the source's own messages in the gap end where it does
    elsewhere: set[str] = set()  # origins reaching the source through a lower level: this link never passes them on
    with CopyScanner(source) as scanner:
        for origin, msg in scanner.records(topic, partition, timeout, first=end):
            if (origin is None or origin.cluster in before or origin.cluster in elsewhere
                    or (origin.topic, origin.partition) != (topic, partition)):
                continue
            flags, malformed, _, _ = copyflags.read_flags(read_headers(msg))
            if malformed:
                continue
            if flags & lower == 0:  # passed on by the link
                before[origin.cluster] = origin.offset
                flags_of.setdefault(origin.cluster, flags)
            else:  # its copies on the target came through another link of this level
                elsewhere.add(origin.cluster)
                after.pop(origin.cluster, None)
            if set(after) <= set(before):
                break
    after.setdefault(source.name, position - 1)  # the link copied all of its source's own messages before
    unbounded = sorted((set(after) ^ set(before)) - elsewhere)
    if unbounded:
        raise NotProven("; ".join(
            f"{o}'s messages cannot be bounded: "
            + (f"{source.name} holds none of them past the gap (offset {end})" if o in after
               else f"{target.name} holds none of them through this link")
            for o in unbounded))
    return [Needed(o, after[o], before[o], 0 if o == source.name else flags_of.get(o, 0)) for o in sorted(after)]


def find_in_archives(location: Any, archived: Sequence[str], topic: str, partition: int,
                     needed: Sequence[Needed]) -> list[Found]:
    """For each :class:`Needed`, the rows of the first archive proven to hold all of it; :class:`NotProven` else."""
    from mirrorflow.archive import coverage, iter_archived

    found: list[Found] = []
    missing: list[str] = []
    for need in needed:
        if need.before - need.after <= 1:
            found.append(Found(need, need.origin))  # nothing of this origin fell into the gap
            continue
        candidates = ([need.origin] if need.origin in archived else []) + [c for c in archived if c != need.origin]
        for cluster in candidates:
            ranges = coverage(location, cluster, topic, partition)
            if cluster == need.origin:
                if any(a <= need.after + 1 and need.before <= b for a, b in ranges):
                    rows = [r for r in iter_archived(location, cluster, topic, partition, need.after + 1, need.before)
                            if r.origin.cluster == cluster]
                    found.append(Found(need, cluster, rows))
                    break
                continue
            between = _bracketed(iter_archived(location, cluster, topic, partition), ranges, need, topic, partition)
            if between is not None:
                found.append(Found(need, cluster, between))
                break
        else:
            missing.append(f"{need} ({'no archive' if not archived else 'archives of ' + ', '.join(archived)} "
                           f"proven to hold them whole)")
    if missing:
        raise NotProven("; ".join(missing))
    return found


def _bracketed(rows: Iterator[Any], ranges: list[tuple[int, int]], need: Needed, topic: str,
               partition: int) -> list[Any] | None:
    """The rows of ``need`` inside one contiguous archived range that also holds rows of its origin on both sides."""
    current, low_seen, inside = -1, False, list[Any]()
    for row in rows:
        where = next((i for i, (a, b) in enumerate(ranges) if a <= row.offset < b), -1)
        if where != current:
            current, low_seen, inside = where, False, []
        o = row.origin
        if o.cluster != need.origin or (o.topic, o.partition) != (topic, partition):
            continue
        if o.offset <= need.after:
            low_seen, inside = True, []
        elif o.offset >= need.before:
            if low_seen:
                return inside
        elif low_seen:
            inside.append(row)
    return None


def restored_messages(found: Sequence[Found], topic: str, partition: int) -> list[tuple[Any, list]]:
    """The rows to restore with the headers they had on the link's source, merged across origins by timestamp.

    Each origin keeps its order; the merge only interleaves origins, as the source did.
    """
    queues = [[(row, _headers_on_source(row, f.needed, topic, partition)) for row in
               sorted(f.rows, key=lambda r: r.origin.offset)] for f in found if f.rows]
    heap = [(q[0][0].timestamp, i, 0) for i, q in enumerate(queues)]
    heapq.heapify(heap)
    out = []
    while heap:
        _, i, j = heapq.heappop(heap)
        out.append(queues[i][j])
        if j + 1 < len(queues[i]):
            heapq.heappush(heap, (queues[i][j + 1][0].timestamp, i, j + 1))
    return out


def _headers_on_source(row: Any, need: Needed, topic: str, partition: int) -> list[tuple[str, bytes | None]]:
    kept = [(k, v) for k, v in row.headers
            if k not in (copyflags.HEADER, copyflags.INVALID_HEADER, provenance.HEADER)]
    flags = [(copyflags.HEADER, copyflags.encode(need.flags_on_source))] if need.flags_on_source else []
    origin = provenance.Origin(row.origin.cluster, topic, partition, row.origin.offset)
    return [*kept, *flags, (provenance.HEADER, origin.encode())]


class OriginSource:
    """The restored messages as a copier's reader: offsets ``start`` onwards, then the gap's end."""

    def __init__(self, messages: Sequence[tuple[Any, list]], topic: str, partition: int, start: int,
                 end: int) -> None:
        if len(messages) > end - start:
            raise NotProven(f"{len(messages)} messages to restore for offsets {start}..{end - 1}: more than the gap "
                            "held; the archives disagree with the source")
        from mirrorflow.archive import ArchivedMessage, EndOfRange  # restores only: pyarrow

        self._messages = [ArchivedMessage(replace(row, offset=start + i, headers=headers), topic, partition)
                          for i, (row, headers) in enumerate(messages)]
        self._end = EndOfRange(end)
        self._done = False

    def assign(self, partitions: list[Any]) -> None:
        self._done = False

    def consume(self, num_messages: int = 500, timeout: float = 1.0) -> list[Any]:
        if self._done:
            return []
        self._done = True
        return [*self._messages, self._end]

    def close(self) -> None:
        self._messages = []


def origin_source(source: ClusterClient, target: ClusterClient, level: int, topic: str, partition: int,
                  start: int, end: int, restore: Mapping[str, Any], timeout: float) -> tuple[OriginSource, str]:
    """The reader restoring ``[start, end)`` by provenance, and a sentence naming the archives it reads."""
    from mirrorflow.archive import ArchiveLocation

    location = ArchiveLocation.from_dict(dict(restore["location"]))
    needed = needed_origins(source, target, level, topic, partition, start, end, timeout)
    found = find_in_archives(location, list(restore.get("by_origin") or ()), topic, partition, needed)
    messages = restored_messages(found, topic, partition)
    if len(messages) > MAX_MESSAGES:
        raise NotProven(f"{len(messages)} messages to restore by provenance: more than one transaction holds "
                        f"({MAX_MESSAGES})")
    said = ", ".join(f"{f.needed.origin}: {len(f.rows)} from the archive of {f.cluster}" for f in found if f.rows)
    return OriginSource(messages, topic, partition, start, end), said or "nothing of any origin fell into the gap"
