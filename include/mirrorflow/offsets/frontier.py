"""Exact positions from provenance: which messages of a partition a group has consumed, on any cluster.

Every message carries its origin (``mirror.origin``; a message without one
originates where it sits). Copies keep each origin partition's order and leave
no gaps, so on any cluster the messages of one origin appear in origin-offset
order. Hence a group that consumed a cluster's partition up to offset ``O`` has
consumed, of each origin ``k``, exactly the messages with origin offset below
``frontier[k]`` = one past the highest origin offset of ``k`` before ``O``.

On another cluster the *cut* is the first message the group has not consumed
(origin offset at or above its origin's frontier value). Everything before the
cut is proven consumed, so committing the cut never skips a message, even when
the topic is written on several clusters at once and the two clusters
interleave origins differently. Messages after the cut that were consumed are
replayed: with a single origin there are none; with several, only those that
the other cluster happened to order after the first unconsumed one.

Under-estimating a frontier value is always safe (an earlier cut, more replay);
over-estimating never happens because values only come from messages seen.

Cost: the publisher scans only what the group consumed since its last publish
(the first publish scans back at most ``FIRST_SCAN_LIMIT`` messages); the
committer scans the target from its previous cut to the new one (the first
time from the target's earliest offset). The scans of one pass go through one
:class:`Scanner`: a consumer per topic instead of one per scan, whose
connection, API versions and metadata would cost every partition its round
trips again (a far cluster's failover paid them three times a partition).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mirrorflow import provenance
from mirrorflow.internal_names import POSITION_SCAN_GROUP
from mirrorflow.kafka import ClusterClient, RangeReader, read_headers

log = logging.getLogger(__name__)

#: How far back the first publish of a group's partition looks for origins.
FIRST_SCAN_LIMIT = 1_000_000
#: Messages read per step when scanning backwards from an end.
BACKWARD_CHUNK = 2000

def origin_key(cluster: str, topic: str, partition: int) -> str:
    return f"{cluster}:{topic}:{partition}"


def origin_of(msg, here: str, topic: str | None = None) -> tuple[str, int]:
    """(origin key, origin offset) of a message read on cluster ``here``; ``topic``: its logical name (the
    message's own name when ``None``: a cluster that does not rename)."""
    topic = msg.topic() if topic is None else topic
    found = provenance.find(read_headers(msg, here), topic, msg.partition())
    if found is None:
        return origin_key(here, topic, msg.partition()), msg.offset()
    return origin_key(found.cluster, found.topic, found.partition), found.offset


def consumed(frontier: dict[str, int], key: str, origin_offset: int) -> bool:
    return origin_offset < frontier.get(key, 0)


class Scanner:
    """The scans of one pass over a cluster's partitions, through one reader per topic.

    The reader is opened at a topic's first scan and closed when a scan asks for
    another topic, or with the scanner: callers scan topic by topic. One reader
    for every topic would be worse: a running consumer learns a new topic only at
    librdkafka's once-a-second topic scan.
    """

    def __init__(self, client: ClusterClient, *, timeout: float = 60.0) -> None:
        self.client, self.timeout = client, timeout
        self._topic: str | None = None
        self._reader: RangeReader | None = None

    def scan(self, topic: str, partition: int, start: int, end: int,
             visit: Callable[[object, str, int], bool]) -> int:
        """Read ``[start, end)`` of the logical ``topic`` (read_committed) calling ``visit(msg, key, origin_offset)``.

        Stops early when ``visit`` returns ``False`` and returns that message's
        offset; otherwise returns ``end``. ``end`` must not exceed the last stable
        offset (the caller reads it first). A bounded read (:mod:`mirrorflow.kafka.ranges`):
        records deleted under it stop it by name, they are never stepped over.
        """
        if start >= end:
            return end
        for msg in self._reader_of(topic).range(self.client.physical(topic), partition, start, end):
            key, origin_offset = origin_of(msg, self.client.name, topic)
            if not visit(msg, key, origin_offset):
                return msg.offset()
        return end

    def _reader_of(self, topic: str) -> RangeReader:
        if self._reader is None or self._topic != topic:
            self.close()
            self._reader = RangeReader.open(self.client, POSITION_SCAN_GROUP, timeout=self.timeout)
            self._topic = topic
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader, self._topic = None, None

    def __enter__(self) -> Scanner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def scan(client: ClusterClient, topic: str, partition: int, start: int, end: int,
         visit: Callable[[object, str, int], bool], *, scanner: Scanner | None = None) -> int:
    """:meth:`Scanner.scan` through ``scanner``, or through a scanner of this one scan's own."""
    if scanner is not None:
        return scanner.scan(topic, partition, start, end, visit)
    with Scanner(client) as own:
        return own.scan(topic, partition, start, end, visit)


def advance(client: ClusterClient, topic: str, partition: int, frontier: dict[str, int],
            start: int, end: int, *, scanner: Scanner | None = None) -> tuple[dict[str, int], int | None]:
    """``frontier`` extended by the messages of ``[start, end)`` (all of them consumed),
    and the CreateTime of the last of them (``None`` if the range holds no message)."""
    out = dict(frontier)
    last_ts: list[int] = []

    def visit(msg, key: str, origin_offset: int) -> bool:
        if origin_offset + 1 > out.get(key, 0):
            out[key] = origin_offset + 1
        last_ts[:] = [msg.timestamp()[1]]
        return True

    scan(client, topic, partition, start, end, visit, scanner=scanner)
    return out, (last_ts[0] if last_ts else None)


def first_unconsumed(client: ClusterClient, topic: str, partition: int, frontier: dict[str, int],
                     start: int, end: int, *, scanner: Scanner | None = None) -> int:
    """The cut: the offset of the first message in ``[start, end)`` the group has not consumed, else ``end``."""
    return scan(client, topic, partition, start, end, lambda _m, k, o: consumed(frontier, k, o), scanner=scanner)


def replay_after(client: ClusterClient, topic: str, partition: int, frontier: dict[str, int],
                 cut: int, end: int, *, scanner: Scanner | None = None) -> int:
    """How many messages of ``[cut, end)`` were already consumed (they will be read again)."""
    count = 0

    def visit(_msg, key: str, origin_offset: int) -> bool:
        nonlocal count
        count += consumed(frontier, key, origin_offset)
        return True

    scan(client, topic, partition, cut, end, visit, scanner=scanner)
    return count


def missing_origins(client: ClusterClient, topic: str, partition: int, frontier: dict[str, int],
                    low: int, end: int, *, scanner: Scanner | None = None) -> tuple[str, ...]:
    """Origins whose last consumed message (``frontier[k] - 1``) this cluster does not hold yet.

    Per-origin order means holding that message implies holding every earlier one,
    so it is enough to find each origin's latest message here: scan backwards in
    chunks from ``end`` and stop as soon as every origin is settled.
    """
    wanted = {k: v - 1 for k, v in frontier.items() if v > 0}
    latest: dict[str, int] = {}
    hi = end
    while wanted.keys() - latest.keys() and hi > low:
        lo = max(low, hi - BACKWARD_CHUNK)
        seen: dict[str, int] = {}

        def visit(_msg, key: str, origin_offset: int) -> bool:
            if key in wanted:
                seen[key] = max(seen.get(key, -1), origin_offset)
            return True

        scan(client, topic, partition, lo, hi, visit, scanner=scanner)
        for key, value in seen.items():
            latest.setdefault(key, value)
        hi = lo
    return tuple(sorted(k for k, need in wanted.items() if latest.get(k, -1) < need))


def initial_frontier(client: ClusterClient, topic: str, partition: int, low: int, offset: int, *,
                     scanner: Scanner | None = None) -> tuple[dict[str, int], int | None]:
    """The frontier of a group seen for the first time: scan back at most ``FIRST_SCAN_LIMIT`` messages.

    Origins found only further back are left at 0: safe, at the price of replay.
    """
    start = max(low, offset - FIRST_SCAN_LIMIT)
    if start > low:
        log.warning("%s %s[%d]: first position scan limited to the last %d messages before offset %d; "
                    "origins seen only earlier will be replayed after a failover", client.name, topic, partition,
                    FIRST_SCAN_LIMIT, offset)
    return advance(client, topic, partition, {}, start, offset, scanner=scanner)
