"""Counting what arrived on one cluster since its last audit, and keeping it (:mod:`mirrorflow.completeness.store`).

Each partition is read from where the previous audit stopped up to its stable end
as the run began (``read_committed``: aborted copies are not there), so a run costs
what arrived since the last one, not what the cluster retains. Two things make a
cluster's tallies incomplete, and both are said, never hidden:

- on a cluster's first audit, a partition that no longer starts at offset 0: what
  retention deleted before was never counted, so the cluster's horizon for the
  topic is the oldest record it still held, and earlier windows are not compared
  on it;
- later, records deleted (retention, ``delete_records``) before an audit read them:
  they were never counted, so their windows fall short on this cluster and show
  as missing, loudly (an ``unaudited`` count and a warning). An audit that runs
  well within retention never sees this unless something deleted messages early;
- a topic deleted and created again (its id changed): it is counted over from
  its first offset, with a new horizon, and its old cells are dropped.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TopicPartition

from mirrorflow import provenance
from mirrorflow.completeness.store import AuditState, Position, StateWriter
from mirrorflow.completeness.tally import Tallies, Tally, WindowKey
from mirrorflow.internal_names import AUDIT_READER_GROUP
from mirrorflow.kafka import (
    ClusterClient,
    RangeReader,
    earliest_and_stable,
    logical_earliest_and_stable,
    mirrored_topics,
    read_headers,
    sharing_admins,
    topic_ids,
)
from mirrorflow.progress import Progress, note, tracking

log = logging.getLogger(__name__)


@dataclass
class TopicCount:
    """What one run counted of one topic on one cluster."""

    cluster: str
    topic: str
    #: Records read in this run (only what arrived since the last audit).
    read: int = 0
    #: Records deleted before any audit read them (see the module).
    unaudited: int = 0
    #: The topic was recreated since the last audit: counted over from its first offset.
    restarted: bool = False
    cells_changed: int = 0


@dataclass
class ClusterCount:
    """One cluster's audit run: per topic what was read, and the cluster's whole tallies and horizons after it."""

    cluster: str
    topics: list[TopicCount] = field(default_factory=list)
    tallies: Tallies = field(default_factory=Tallies)
    horizons: dict[str, int] = field(default_factory=dict)

    @property
    def read(self) -> int:
        return sum(t.read for t in self.topics)


def count_cluster(client: ClusterClient, state: AuditState, selects: Callable[[str], bool],
                  timeout: float = 30.0, *, run_id: str = "") -> ClusterCount:
    """Count every topic ``selects`` picks on ``client``'s cluster from ``state``'s positions, and store the result.

    Progress (:mod:`mirrorflow.progress`): the plan is every partition's range as the
    count begins (one extra offsets read per cluster), corrected topic by topic as each
    topic's own ranges are read just before it is counted. Those reads share one admin
    client per cluster (:mod:`mirrorflow.kafka.shared`), not one each; the counts are
    written by one producer (:class:`~mirrorflow.completeness.store.StateWriter`).
    Each topic is read by a reader of its own (:func:`_read_ranges` says why).
    """
    with sharing_admins():
        return _count_cluster(client, state, selects, timeout, run_id)


def _count_cluster(client: ClusterClient, state: AuditState, selects: Callable[[str], bool], timeout: float,
                   run_id: str) -> ClusterCount:
    topics = {t: n for t, n in mirrored_topics(client, timeout).items() if selects(t)}  # logical names
    found = topic_ids(client, [client.physical(t) for t in topics], timeout)
    ids = {t: found[client.physical(t)] for t in topics if client.physical(t) in found}
    out = ClusterCount(client.name)
    tps = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    lows, ends = logical_earliest_and_stable(client, tps, timeout) if tps else ({}, {})
    estimates = {topic: sum(max(0, ends[(topic, p)] - start)
                            for p, start in _starts(state, topic, n, ids.get(topic), lows).items())
                 for topic, n in topics.items()}
    progress = Progress(f"completeness audit{f' run {run_id}' if run_id else ''} of {client.name}",
                        sum(estimates.values()), fields={"job": "audit", "run_id": run_id, "cluster": client.name})
    with tracking(progress), progress.running(), StateWriter(client, state.window_s, timeout) as writer:
        for topic, partitions in sorted(topics.items()):
            out.topics.append(_count_topic(client, state, topic, partitions, ids.get(topic), timeout, writer,
                                           progress, estimates[topic]))
    progress.finish()
    out.tallies = state.tallies
    out.horizons = dict(state.horizons)
    return out


def _recreated(state: AuditState, topic: str, partitions: int, topic_id: str | None) -> bool:
    """Whether ``topic``'s stored positions belong to an earlier topic of the same name (its id changed)."""
    return any(pos is not None and pos.topic_id and topic_id and pos.topic_id != topic_id
               for pos in (state.positions.get((topic, p)) for p in range(partitions)))


def _starts(state: AuditState, topic: str, partitions: int, topic_id: str | None,
            lows: Mapping[tuple[str, int], int]) -> dict[int, int]:
    """Where this run reads each partition from: the stored position, else (or when recreated) its first offset."""
    fresh = _recreated(state, topic, partitions, topic_id)
    out = {}
    for p in range(partitions):
        pos = None if fresh else state.positions.get((topic, p))
        low = lows[(topic, p)]
        out[p] = low if pos is None else max(low, pos.next)
    return out


def _count_topic(client: ClusterClient, state: AuditState, topic: str, partitions: int, topic_id: str | None,
                 timeout: float, writer: StateWriter, progress: Progress | None = None,
                 estimate: int = 0) -> TopicCount:
    result = TopicCount(client.name, topic)
    dropped: list[WindowKey] = []
    stored = {p: state.positions.get((topic, p)) for p in range(partitions)}
    if _recreated(state, topic, partitions, topic_id):
        log.warning("%s: topic %s was recreated since its last audit: it is counted over from its first offset",
                    client.name, topic)
        result.restarted = True
        stored = {p: None for p in stored}
        dropped = [k for k in state.tallies.cells if k.topic == topic]
        for key in dropped:
            del state.tallies.cells[key]
        state.horizons.pop(topic, None)
    tps = [TopicPartition(client.physical(topic), p) for p in range(partitions)]
    lows, ends = (client.by_logical(f) for f in earliest_and_stable(client, tps, timeout))
    new = Tallies(state.window_s)
    positions: dict[int, Position] = {}
    horizon = state.horizons.get(topic)
    first_audit = all(pos is None for pos in stored.values())
    ranges: dict[int, tuple[int, int]] = {}
    for p in range(partitions):
        low, end = lows[(topic, p)], ends[(topic, p)]
        pos = stored[p]
        start = low if pos is None else pos.next
        if low > start:
            result.unaudited += low - start
            start = low
        ranges[p] = (start, max(start, end))
        if pos is None or end != pos.next or pos.topic_id != topic_id:
            positions[p] = Position(max(start, end), topic_id)
    if progress is not None:  # the plan counted this topic as of the count's start; now it is known exactly
        progress.plan_more(sum(end - start for start, end in ranges.values()) - estimate)
    own = {p: f"{client.name}:{topic}:{p}:".encode() for p in ranges}
    read, first_ts = _tally(_read_ranges(client, topic, ranges, timeout), new, own, topic)
    result.read += read
    for p in ranges:
        if first_audit and lows[(topic, p)] > 0:
            # what retention deleted before the first audit was never counted: from here on (or now, if none is left)
            since = first_ts.get(p, int(time.time() * 1000))
            horizon = since if horizon is None else max(horizon, since)
    if result.unaudited and not first_audit:
        log.warning("%s %s: %d records were deleted before an audit read them: they count as missing here",
                    client.name, topic, result.unaudited)
    changed: dict[WindowKey, Tally] = {}
    for key, tally in new:
        merged = state.tallies.cells[key].merge(tally) if key in state.tallies.cells else tally
        state.tallies.cells[key] = changed[key] = merged
    result.cells_changed = len(changed)
    new_horizon = horizon if horizon is not None and horizon != state.horizons.get(topic) else None
    if new_horizon is not None:
        state.horizons[topic] = new_horizon
    if positions or changed or dropped or new_horizon is not None:
        writer.add(topic, positions, changed, new_horizon, dropped=dropped)
    for p, pos in positions.items():
        state.positions[(topic, p)] = pos
    return result


_ORIGIN = provenance.HEADER
_MASK = (1 << 64) - 1


def _tally(messages: Iterable[Any], tallies: Tallies, own: Mapping[int, bytes],
           topic: str) -> tuple[int, dict[int, int]]:
    """Add ``messages`` (a topic's) to ``tallies``; returns how many, and each partition's first timestamp.

    The hot loop of an audit, so it works on the origin header's bytes as they are
    (``Origin.encode()``'s form, kept unchanged by every hop) instead of keeping an
    object per record: the identity hash is the same (:func:`tally.identity_hash_of`).
    A record without an origin header (produced on this cluster) is its own origin,
    ``own[partition]`` + its offset; so is one whose header does not prove it a copy
    (not a valid origin, or one of another topic or partition), as
    :func:`mirrorflow.provenance.find` reads it.
    """
    size = tallies.window_s * 1000
    sums: dict[tuple[bytes, int], list[int]] = {}
    blake2b = hashlib.blake2b
    checked: dict[tuple[bytes, int], bool] = {}  # (origin prefix cluster:topic:partition, partition) -> proves
    count, first_ts = 0, {}
    for msg in messages:
        value = None
        for name, header in read_headers(msg) or ():
            if name == _ORIGIN:
                value = header
                break
        if value is not None:  # a proof as provenance.find reads it? Checked once per origin partition
            head, _, tail = value.rpartition(b":")
            valid = checked.get((head, msg.partition()))
            if valid is None:
                valid = checked[(head, msg.partition())] = provenance.find(
                    [(_ORIGIN, head + b":0")], topic, msg.partition()) is not None
            if not (valid and tail.isdigit()):
                value = None
        if value is None:
            value = own[msg.partition()] + str(msg.offset()).encode()
        ts = msg.timestamp()[1]  # the origin's: copies are produced with it
        if msg.partition() not in first_ts:
            first_ts[msg.partition()] = ts
        cell = (value[:value.index(b":")], ts - ts % size)
        h = int.from_bytes(blake2b(value, digest_size=8).digest(), "big")
        found = sums.get(cell)
        if found is None:
            sums[cell] = [1, h]
        else:
            found[0] += 1
            found[1] = (found[1] + h) & _MASK
        count += 1
    for (cluster, window), (n, total) in sums.items():
        key = WindowKey(topic, cluster.decode(), window)
        tallies.cells[key] = tallies.cells[key].merge(Tally(n, total)) if key in tallies.cells else Tally(n, total)
    return count, first_ts


def _read_ranges(client: ClusterClient, topic: str, ranges: Mapping[int, tuple[int, int]],
                 timeout: float) -> Iterator[Any]:
    """The records of ``topic`` in ``ranges[partition] = (start, end)``, every partition at once (one consumer,
    ``read_committed``), each partition in order. Fails naming the cluster when nothing arrives for ``timeout``,
    and as :class:`~mirrorflow.errors.OffsetGone` when records are deleted before this read gets to them (the
    next audit counts them as unaudited: :mod:`mirrorflow.kafka.ranges` never skips them in silence).

    A reader per topic, not one for all: a running consumer learns a topic added to its assignment
    only at librdkafka's next topic scan, once a second, so a kept reader waited that long for every
    topic; a fresh one asks at its start (docs/benchmarks.md, "A first audit").
    """
    wanted = {(client.physical(topic), p): r for p, r in ranges.items() if r[0] < r[1]}  # read on its name there
    if not wanted:
        return
    noted = sum(start for start, _ in wanted.values())
    with RangeReader.open(client, AUDIT_READER_GROUP, timeout=timeout, doing="audit read of") as reader:
        for batch in reader.batches(wanted):
            yield from batch
            # progress (mirrorflow.progress), once per batch: the offsets passed, markers included
            passed = sum(reader.positions().values())
            note(passed - noted, sum(map(len, batch)))  # len: a record's value size
            noted = passed
        note(sum(reader.positions().values()) - noted, 0)  # the markers after each range's last record
