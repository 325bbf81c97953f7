"""Where a link resumes when its checkpoint is gone, proven from the copies on its target.

Kafka may delete a link's checkpoint (``offsets.retention.minutes`` after its
last commit, when level runs stopped for that long; see the keep-alive in
:mod:`mirrorflow.copy.plan`). The target still holds the copies, each stamped
with its origin (:mod:`mirrorflow.provenance`), so the resume point can often be
proven instead of guessed:

- ``H``, the highest origin offset of the target's copies whose origin is this
  very source partition: no record of the source's own after ``H`` is on the
  target;
- after ``H`` the source may hold copies from other clusters that this link
  passes on too (the copy flags say which; the same decision as before): the
  target is searched for their origins.

The link copies in offset order and commits copies and checkpoint together, so
it stopped right after the last record it copied: the resume point is one past
the last record after ``H`` that the target holds (or ``H + 1``). That is proven
only if every record the link copies before that point is on the target; a hole
(the target lost data, or the history is not what this rule expects) is refused,
and so is a link whose target was switched or pinned (its target also receives
this source's messages through other links) or a range too large to read.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirrorflow.copy.headers import CopyHeaders
from mirrorflow.copy.state.copies import CopyScanner
from mirrorflow.kafka import ClusterClient, read_headers

#: At most this many source records after the last copy are read to prove a resume point.
SCAN_LIMIT = 1_000_000


@dataclass(frozen=True)
class Recovery:
    """The proven resume point (``None``: not proven) and how it was found, in words."""

    position: int | None
    why: str


def recover_position(source: ClusterClient, target: ClusterClient, level: int, topic: str, partition: int,
                     highest: int, end: int, timeout: float) -> Recovery:
    """The exact resume point of a link whose copies on ``target`` go up to origin offset ``highest``."""
    start = highest + 1
    held = f"{target.name} holds copies of {source.name}'s messages up to source offset {highest}"
    if start >= end:
        return Recovery(start, f"{held}, the source's end")
    if end - start > SCAN_LIMIT:
        return Recovery(None, f"{held}, and {end - start} records follow it: more than {SCAN_LIMIT} to read to "
                              f"prove where the link stopped")
    copied = _copied_after(source, level, topic, partition, start, end, timeout)
    wanted = {origin: offset for offset, origin in copied if origin is not None}
    held_offsets: set[int] = set()
    if wanted:
        with CopyScanner(target) as scanner:
            for o in scanner.origins(topic, partition, timeout):
                if o is not None and (o.cluster, o.topic, o.partition, o.offset) in wanted:
                    held_offsets.add(wanted[(o.cluster, o.topic, o.partition, o.offset)])
    position = max(held_offsets) + 1 if held_offsets else start
    missing = [offset for offset, _ in copied if offset < position and offset not in held_offsets]
    if missing:
        return Recovery(None, f"{held}, and copies from other clusters after it up to source offset {position - 1}, "
                              f"but not the ones at source offsets {missing[:5]}: the copies are not in the order the "
                              f"link writes them")
    return Recovery(position, f"{held}" + (f" and copies from other clusters up to source offset {position - 1}"
                                           if held_offsets else "")
                    + f"; of the {end - position} records after that, none is on {target.name} "
                      f"({len(wanted)} copies from other clusters checked)")


@dataclass(frozen=True)
class RangeCopies:
    """Of a source range: how many records the link copies (the copy flags decide), and how many of those
    the target holds (by provenance: the source's own records and the copies it passes on alike)."""

    copied: int
    held: int


def range_copies(source: ClusterClient, target: ClusterClient, level: int, topic: str, partition: int, first: int,
                 end: int, timeout: float) -> RangeCopies:
    """What a link at ``level`` copies of ``topic[partition]``'s ``[first, end)``, and what ``target`` holds of it."""
    if first >= end:
        return RangeCopies(0, 0)
    copied = _copied_after(source, level, topic, partition, first, end, timeout)
    wanted = {origin if origin is not None else (source.name, topic, partition, offset) for offset, origin in copied}
    held = 0
    with CopyScanner(target) as scanner:
        for o in scanner.origins(topic, partition, timeout):
            held += o is not None and (o.cluster, o.topic, o.partition, o.offset) in wanted
    return RangeCopies(len(copied), held)


def _copied_after(source: ClusterClient, level: int, topic: str, partition: int, start: int, end: int,
                  timeout: float) -> list[tuple[int, tuple[str, str, int, int] | None]]:
    """The records in ``[start, end)`` this link copies: ``(offset, origin)``, origin ``None`` for the source's own."""
    decide = CopyHeaders(source.name, topic, partition, level=level).for_copy
    out: list[tuple[int, tuple[str, str, int, int] | None]] = []
    with CopyScanner(source) as scanner:
        for origin, msg in scanner.records(topic, partition, timeout, first=start, end=end):
            copies, _ = decide(read_headers(msg), msg.offset())
            if copies is None:
                continue  # skipped by the copy flags: skipped again, whatever the resume point
            if origin is None or origin.cluster == source.name:
                out.append((msg.offset(), None))
            else:
                out.append((msg.offset(), (origin.cluster, origin.topic, origin.partition, origin.offset)))
    return out
