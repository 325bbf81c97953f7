"""Replication lag per link-partition and consumer-group lag per cluster, checked against the topology's SLA.

What an operator asks before a failover or when the level DAGs fall behind:
*how far behind is each link, and since when?* Two numbers per partition:

- **records**: offsets not yet copied, from where the link resumes (its
  checkpoint on its *current* target, clamped to the source's first offset) to
  the source's last stable offset (the end a ``read_committed`` copier can
  reach). Offsets the copier will skip (copy flags) count too: they are not
  behind the checkpoint yet.
- **seconds**: the age of the oldest message not yet copied, i.e. of the first
  committed message at or after that position (read with a ``read_committed``
  consumer). Zero when nothing is pending. A count says how much work there is;
  an age says how stale a consumer on the target is, which is what an SLA is
  about.

For consumer groups the same two numbers, from the group's committed offset.

Everything is measured with batched requests: one metadata request per cluster
(which doubles as the reachability probe), one list-offsets pair per source
cluster, one offset fetch per link (or group), and one consumer per cluster to
read the oldest pending messages. An unreachable cluster is probed once and
reported as such; the rest is still measured. Committed offsets are read with a
consumer's ``committed()`` and never with ``AdminClient.list_consumer_group_offsets``,
which crashes librdkafka 2.16 when the group coordinator answers with an error
(see :func:`mirrorflow.kafka.admin.committed_offsets`).

The result is a :class:`LagSnapshot`: rows, violations of the ``lag`` SLA of the
topology (:mod:`mirrorflow.topology.lag`), and a JSON-able dict that the
``mirror_lag_monitor`` DAG stores for other tasks and the UI.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from confluent_kafka import (TIMESTAMP_NOT_AVAILABLE, Consumer, IsolationLevel, KafkaError, KafkaException,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, OffsetSpec

from mirrorflow.copy.job import read_checkpoints
from mirrorflow.copy.partition import SWITCHED_MARK
from mirrorflow.errors import KafkaOperationError, MirrorflowError
from mirrorflow.kafka.admin import committed_offsets
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.topology import Distributor, Topology, is_internal_topic
from mirrorflow.topology.lag import Bound, LagConfig
from mirrorflow.topology.offsets import is_internal_group

log = logging.getLogger(__name__)

#: Group id of the consumer that reads the oldest pending messages (it never commits).
LAG_READER_GROUP = "_mirrorflow.lag-reader"
#: ``topic`` of a row that stands for a whole link, group or cluster (an error, or a group without offsets).
WHOLE = "*"

DEFAULT_TIMEOUT = 10.0


# --------------------------------------------------------------------------- rows


@dataclass
class LinkPartitionLag:
    """Lag of one link on one source topic-partition (or, with ``topic == "*"``, why the link was not measured)."""

    link_id: str
    level: int
    source: str
    target: str
    topic: str
    partition: int | None
    #: Offsets not yet copied; ``None`` when not measured (see ``error``).
    records: int | None
    #: Age of the oldest message not yet copied; ``None`` when unknown (see ``note``).
    seconds: float | None = None
    #: The link's committed position on its current target (``None``: nothing copied yet).
    checkpoint: int | None = None
    #: Where the next copy starts: the checkpoint, or the source's first offset if that is later.
    start: int | None = None
    #: The source's last stable offset when measured.
    end: int | None = None
    #: CreateTime (ms) of the oldest message not yet copied.
    oldest_timestamp: int | None = None
    note: str | None = None
    error: str | None = None

    @property
    def where(self) -> str:
        place = f"link {self.link_id} ({self.source} -> {self.target})"
        return place if self.topic == WHOLE else f"{place} {self.topic}[{self.partition}]"


@dataclass
class GroupPartitionLag:
    """Lag of one consumer group on one topic-partition of one cluster.

    With ``topic == "*"`` the row stands for the whole group (it has no committed
    offset on the measured topics) or, with ``group == "*"``, for the whole
    cluster (its groups could not be measured: see ``error``).
    """

    cluster: str
    group: str
    topic: str
    partition: int | None
    records: int | None
    seconds: float | None = None
    committed: int | None = None
    end: int | None = None
    oldest_timestamp: int | None = None
    #: The group's state (``stable``, ``empty``, ...) and member count, when known.
    state: str | None = None
    members: int | None = None
    note: str | None = None
    error: str | None = None

    @property
    def where(self) -> str:
        if self.group == WHOLE:
            return f"cluster {self.cluster}"
        place = f"group {self.group} on {self.cluster}"
        return place if self.topic == WHOLE else f"{place} {self.topic}[{self.partition}]"


@dataclass(frozen=True)
class Violation:
    """One row over its bound (or not measurable while a bound applies), in words."""

    kind: str  # "link" or "group"
    where: str
    text: str

    def __str__(self) -> str:
        return self.text


# --------------------------------------------------------------------------- clusters


class Clusters:
    """Client settings plus what one measurement learned about each cluster: its topics, or why it is down.

    Each cluster is asked for its metadata once (in parallel, bounded by
    ``timeout``); a cluster that does not answer is remembered as unreachable
    so that nothing else waits on it again during the measurement.
    """

    def __init__(self, clients: Mapping[str, ClusterClient], unavailable: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.clients = dict(clients)
        self.timeout = timeout
        self._down: dict[str, str] = dict(unavailable or {})
        self._topics: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, clients: "Mapping[str, ClusterClient] | Clusters", timeout: float = DEFAULT_TIMEOUT) -> "Clusters":
        return clients if isinstance(clients, Clusters) else cls(clients, timeout=timeout)

    def probe(self, names: Iterable[str]) -> None:
        """Fetch the metadata of every named cluster at once, so unreachable ones cost one timeout in total."""
        todo = sorted({n for n in names if n not in self._down and n not in self._topics})
        if len(todo) > 1:
            with ThreadPoolExecutor(max_workers=min(8, len(todo)), thread_name_prefix="mirrorflow-lag-probe") as pool:
                list(pool.map(self.down, todo))
        else:
            for name in todo:
                self.down(name)

    def down(self, name: str) -> str | None:
        """Why ``name`` cannot be measured (``"is unreachable at ..."``), or ``None`` when it answered."""
        if name in self._down:
            return self._down[name]
        if name in self._topics:
            return None
        client = self.clients.get(name)
        if client is None:
            return self._mark(name, "has no client settings")
        admin_client = AdminClient(client.admin())
        try:
            metadata = admin_client.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            err = exc.args[0]
            return self._mark(name, f"is unreachable at {client.bootstrap}: {err.name()}: {err.str()}")
        topics = {t: len(m.partitions) for t, m in metadata.topics.items() if m.error is None}
        for t, m in metadata.topics.items():
            if m.error is not None:
                log.warning("cluster %s: topic %s left out of the lag measurement: %s", name, t, m.error)
        with self._lock:
            self._topics[name] = topics
        return None

    def _mark(self, name: str, reason: str) -> str:
        log.warning("cluster %s: %s", name, reason)
        with self._lock:
            self._down[name] = reason
        return reason

    def topics(self, name: str) -> dict[str, int]:
        """Topic -> partition count of a cluster that answered (call :meth:`down` first)."""
        return self._topics[name]

    @property
    def unreachable(self) -> dict[str, str]:
        return dict(sorted(self._down.items()))


# --------------------------------------------------------------------------- link lag


def link_lag(topology: Topology, clients: Mapping[str, ClusterClient] | Clusters, links: Iterable[Distributor],
             topics: Iterable[str] | None = None, now: datetime | None = None, *,
             timeout: float = DEFAULT_TIMEOUT) -> list[LinkPartitionLag]:
    """Lag of each link on each selected topic-partition of its source.

    ``links`` carry their *effective* target (see
    :func:`mirrorflow.copy.links.effective_links`): the checkpoint there is the
    authoritative position. ``topics`` (names or regexes, full match) narrows the
    topology's topics. A link whose source or target cannot be measured gets one
    row with ``topic == "*"`` and the reason in ``error``.
    """
    now_ms = _epoch_ms(now)
    reach = Clusters.of(clients, timeout)
    links = list(links)
    wanted = _matcher(topics)
    reach.probe(c for link in links for c in (link.source, link.default_target))
    rows: list[LinkPartitionLag] = []
    measured: list[tuple[Distributor, list[TopicPartition]]] = []
    for link in links:
        problem = next((f"cluster {c} {reason}" for c in (link.source, link.default_target)
                        if (reason := reach.down(c)) is not None), None)
        if problem is not None:
            rows.append(_link_error(link, f"not measured: {problem}"))
            continue
        tps = [TopicPartition(t, p) for t, n in sorted(reach.topics(link.source).items())
               if topology.selects(t) and wanted(t) for p in range(n)]
        measured.append((link, tps))

    offsets: dict[str, dict[tuple[str, int], tuple[int, int] | str]] = {}
    for source in sorted({link.source for link, _ in measured}):
        union = {(tp.topic, tp.partition) for link, tps in measured if link.source == source for tp in tps}
        offsets[source] = _offsets(reach.clients[source], sorted(union), timeout)

    pending: list[LinkPartitionLag] = []
    for link, tps in measured:
        try:
            target = reach.clients[link.default_target]
            checkpoints = read_checkpoints(target, link.link_id, tps, timeout) if tps else {}
        except MirrorflowError as exc:
            rows.append(_link_error(link, f"checkpoints not read: {exc}"))
            continue
        for tp in tps:
            key = (tp.topic, tp.partition)
            row = LinkPartitionLag(link.link_id, link.level, link.source, link.default_target, tp.topic, tp.partition,
                                   records=None)
            found = offsets[link.source][key]
            if isinstance(found, str):
                row.error = f"source offsets not read: {found}"
                rows.append(row)
                continue
            low, end = found
            checkpoint, meta = checkpoints.get(key, (None, ""))
            if meta.startswith(SWITCHED_MARK):
                row.note = (f"the checkpoint on {link.default_target} says the link was switched to "
                            f"{meta[len(SWITCHED_MARK):]}: the effective target given is stale")
            row.checkpoint, row.end = checkpoint, end
            row.start = low if checkpoint is None or checkpoint < low else checkpoint
            if checkpoint is not None and checkpoint < low:
                row.note = _join(row.note, f"{low - checkpoint} offsets were deleted by retention before being copied")
            if row.start > end:
                row.note = _join(row.note, f"checkpoint {row.start} is past the source's end {end} (truncated?)")
            row.records = max(0, end - row.start)
            row.seconds = 0.0 if row.records == 0 else None
            rows.append(row)
            if row.records:
                pending.append(row)
    _fill_ages(reach, pending, lambda r: r.source, lambda r: r.start, now_ms, timeout)
    return rows


def _link_error(link: Distributor, error: str) -> LinkPartitionLag:
    return LinkPartitionLag(link.link_id, link.level, link.source, link.default_target, WHOLE, None, records=None,
                            error=error)


# --------------------------------------------------------------------------- group lag


def group_lag(clients: Mapping[str, ClusterClient] | Clusters, groups: Callable[[str], bool] | None = None,
              now: datetime | None = None, *, clusters: Iterable[str] | None = None,
              topics: Callable[[str], bool] | None = None, timeout: float = DEFAULT_TIMEOUT) -> list[GroupPartitionLag]:
    """Lag of every selected consumer group on every cluster, per topic-partition it committed on.

    ``groups`` selects group ids (e.g. ``topology.offsets.selects``); mirrorflow's
    own groups (``_mirrorflow.*``) are never reported. ``clusters`` defaults to
    every cluster with a client; ``topics`` narrows the topics looked at
    (default: every topic but internal ones). Records count from
    the committed offset (or the first offset still on the cluster, if later) to
    the last stable offset; partitions without a committed offset are left out,
    and a group with none at all gets one ``topic == "*"`` row with its state.
    """
    now_ms = _epoch_ms(now)
    reach = Clusters.of(clients, timeout)
    names = sorted(clusters if clusters is not None else reach.clients)
    reach.probe(names)
    rows: list[GroupPartitionLag] = []
    pending: list[GroupPartitionLag] = []
    for cluster in names:
        reason = reach.down(cluster)
        if reason is not None:
            rows.append(GroupPartitionLag(cluster, WHOLE, WHOLE, None, None,
                                          error=f"consumer groups not measured: cluster {cluster} {reason}"))
            continue
        client = reach.clients[cluster]
        try:
            described = _groups(client, groups, timeout)
        except MirrorflowError as exc:
            rows.append(GroupPartitionLag(cluster, WHOLE, WHOLE, None, None, error=str(exc)))
            continue
        tps = [(t, p) for t, n in sorted(reach.topics(cluster).items())
               if not is_internal_topic(t) and (topics is None or topics(t)) for p in range(n)]
        # one offset fetch per group (a group's offsets live on its own coordinator); a few at a time
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="mirrorflow-lag-groups") as pool:
            answers = pool.map(functools.partial(_committed_or_error, client, tps=tps, timeout=timeout), described)
            committed = dict(zip(described, answers))
        used = sorted({k for c in committed.values() if isinstance(c, dict) for k in c})
        offsets = _offsets(client, used, timeout) if used else {}
        for group, (state, members) in described.items():
            found = committed[group]
            if isinstance(found, str):
                rows.append(GroupPartitionLag(cluster, group, WHOLE, None, None, state=state, members=members,
                                              error=f"committed offsets not read: {found}"))
                continue
            if not found:
                rows.append(GroupPartitionLag(cluster, group, WHOLE, None, None, state=state, members=members,
                                              note="no committed offset on the measured topics"))
                continue
            for (topic, partition), offset in sorted(found.items()):
                row = GroupPartitionLag(cluster, group, topic, partition, None, committed=offset, state=state,
                                        members=members)
                bounds = offsets[(topic, partition)]
                if isinstance(bounds, str):
                    row.error = f"offsets not read: {bounds}"
                    rows.append(row)
                    continue
                low, end = bounds
                start = max(offset, low)
                if offset < low:
                    row.note = f"committed offset {offset} is below the first offset {low} still on the cluster"
                row.end = end
                row.records = max(0, end - start)
                row.seconds = 0.0 if row.records == 0 else None
                rows.append(row)
                if row.records:
                    pending.append(row)
    _fill_ages(reach, pending, lambda r: r.cluster, lambda r: r.end - r.records, now_ms, timeout)
    return rows


def _groups(client: ClusterClient, selector: Callable[[str], bool] | None, timeout: float
            ) -> dict[str, tuple[str | None, int | None]]:
    """Selected groups of a cluster with their state and member count (sorted by id)."""
    admin_client = AdminClient(client.admin())  # referenced until every future below is done
    try:
        listing = admin_client.list_consumer_groups(request_timeout=timeout).result(timeout=timeout + 5)
    except KafkaException as exc:
        raise KafkaOperationError(client.name, "list consumer groups", exc.args[0]) from exc
    for err in listing.errors or []:
        log.warning("cluster %s: listing consumer groups: %s", client.name, err)
    ids = sorted(g.group_id for g in listing.valid
                 if not is_internal_group(g.group_id) and (selector is None or selector(g.group_id)))
    out: dict[str, tuple[str | None, int | None]] = {g: (None, None) for g in ids}
    if ids:
        futures = admin_client.describe_consumer_groups(ids, request_timeout=timeout)
        for group, future in futures.items():
            try:
                desc = future.result(timeout=timeout + 5)
                out[group] = (desc.state.name.lower() if desc.state is not None else None, len(desc.members))
            except Exception as exc:  # the state is a courtesy: offsets are still measured
                log.warning("cluster %s: describing group %s: %s", client.name, group, exc)
    return out


def _committed_or_error(client: ClusterClient, group: str, *, tps: list[tuple[str, int]], timeout: float
                        ) -> dict[tuple[str, int], int] | str:
    """The group's committed offsets among ``tps`` (absent where it never committed), or why they were not read."""
    if not tps:
        return {}
    try:
        answer = committed_offsets(client, group, [TopicPartition(t, p) for t, p in tps],
                                   f"committed offsets of group {group}", timeout)
    except MirrorflowError as exc:
        return str(exc)
    return {(tp.topic, tp.partition): tp.offset for tp in answer if tp.offset >= 0}


# --------------------------------------------------------------------------- offsets and ages


def _offsets(client: ClusterClient, tps: list[tuple[str, int]], timeout: float
             ) -> dict[tuple[str, int], tuple[int, int] | str]:
    """``(first offset, last stable offset)`` per partition, or the error text of a partition that failed.

    Two batched requests (earliest; latest with ``read_committed``), as
    :func:`mirrorflow.kafka.admin.earliest_and_stable` makes for the copy
    planner, except that a failing partition is reported in its row instead of
    failing the whole cluster's measurement.
    """
    out: dict[tuple[str, int], Any] = {}
    if not tps:
        return out
    admin_client = AdminClient(client.admin())  # referenced until every future below is done
    answers = []
    for spec, isolation in ((OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
                            (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)):
        try:
            futures = admin_client.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                                isolation_level=isolation, request_timeout=timeout)
        except KafkaException as exc:
            err = exc.args[0]
            return {k: f"{err.name()}: {err.str()}" for k in tps}
        answer = {}
        for tp, future in futures.items():
            try:
                answer[(tp.topic, tp.partition)] = future.result(timeout=timeout + 5).offset
            except KafkaException as exc:
                err = exc.args[0]
                answer[(tp.topic, tp.partition)] = f"{err.name()}: {err.str()}"
            except Exception as exc:  # a future timing out raises concurrent.futures.TimeoutError
                answer[(tp.topic, tp.partition)] = f"{type(exc).__name__}: {exc}"
        answers.append(answer)
    for key in tps:
        low, end = answers[0].get(key, "no answer"), answers[1].get(key, "no answer")
        out[key] = low if isinstance(low, str) else end if isinstance(end, str) else (low, end)
    return out


@dataclass(frozen=True)
class _First:
    timestamp: int | None
    note: str | None = None


def _fill_ages(reach: Clusters, rows: list, cluster_of: Callable[[Any], str], start_of: Callable[[Any], int],
               now_ms: int, timeout: float) -> None:
    """Set ``seconds`` and ``oldest_timestamp`` of pending rows from the first message at their start."""
    by_cluster: dict[str, list] = defaultdict(list)
    for row in rows:
        by_cluster[cluster_of(row)].append(row)
    for cluster, group in sorted(by_cluster.items()):
        wanted = {(r.topic, r.partition, start_of(r), r.end) for r in group}
        try:
            first = _first_messages(reach.clients[cluster], wanted, timeout)
        except KafkaException as exc:
            err = exc.args[0]
            note = f"age not read: {err.name()}: {err.str()}"
            for r in group:
                r.note = _join(r.note, note)
            continue
        for r in group:
            found = first.get((r.topic, r.partition, start_of(r)), _First(None, "age not read"))
            if found.note:
                r.note = _join(r.note, found.note)
            if found.timestamp is not None:
                r.oldest_timestamp = found.timestamp
                r.seconds = round(max(0.0, (now_ms - found.timestamp) / 1000.0), 3)
            elif found.note is None:  # only transaction markers or aborted records before the end
                r.seconds = 0.0


def _first_messages(client: ClusterClient, wanted: set[tuple[str, int, int, int]], timeout: float
                    ) -> dict[tuple[str, int, int], _First]:
    """The CreateTime of the first committed message at or after each ``(topic, partition, start)``.

    One ``read_committed`` consumer for the cluster; a partition asked for at
    several starts (links or groups at different positions) is read in several
    rounds. A message at or past ``end`` (all before it were aborted or markers)
    means nothing is pending: ``timestamp`` and ``note`` are both ``None``.
    """
    starts: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for topic, partition, start, end in sorted(wanted):
        starts[(topic, partition)].append((start, end))
    rounds: list[dict[tuple[str, int], tuple[int, int]]] = []
    for key, items in starts.items():
        for i, item in enumerate(items):
            if len(rounds) <= i:
                rounds.append({})
            rounds[i][key] = item
    out: dict[tuple[str, int, int], _First] = {}
    for todo in rounds:
        pending = dict(todo)
        # a consumer per round: paused partitions of one round must not stay paused in the next
        consumer = Consumer(client.consumer(LAG_READER_GROUP, **{
            "enable.partition.eof": True,
            "max.partition.fetch.bytes": 65536,  # only the first message of each partition is wanted
        }))
        try:
            consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in sorted(pending.items())])
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=min(500, len(pending) * 2), timeout=0.5):
                    key = (msg.topic(), msg.partition())
                    if key not in pending:
                        continue
                    start, end = pending[key]
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            out[(*key, start)] = _First(None)
                        elif err.retriable():
                            continue
                        else:
                            out[(*key, start)] = _First(None, f"age not read: {err.name()}: {err.str()}")
                    elif msg.offset() < start:
                        continue
                    elif msg.offset() >= end:
                        out[(*key, start)] = _First(None)
                    else:
                        ts_type, ts = msg.timestamp()
                        out[(*key, start)] = (_First(ts) if ts_type != TIMESTAMP_NOT_AVAILABLE
                                              else _First(None, "the message has no timestamp"))
                    pending.pop(key)
                    consumer.pause([TopicPartition(*key)])  # its first message is all that is wanted
        finally:
            consumer.close()
        for (t, p), (start, _) in pending.items():
            out[(t, p, start)] = _First(None, f"age not read: no message within {timeout:.0f}s")
    return out


# --------------------------------------------------------------------------- SLA


def link_violations(rows: Iterable[LinkPartitionLag], bound_of: Callable[[str], Bound | None]) -> list[Violation]:
    """Link rows over their bound; a row not measured violates any bound that applies to its link."""
    out = []
    for row in rows:
        bound = bound_of(row.link_id)
        if bound is not None:
            out += _over(row, "link", bound)
    return out


def group_violations(rows: Iterable[GroupPartitionLag], bound_of: Callable[[str], Bound | None],
                     any_bound: bool) -> list[Violation]:
    """Group rows over their bound. A cluster whose groups were not measured violates when ``any_bound``."""
    out = []
    for row in rows:
        if row.group == WHOLE:
            if any_bound and row.error:
                out.append(Violation("group", row.where, f"{row.where}: {row.error}"))
            continue
        bound = bound_of(row.group)
        if bound is not None and (row.topic != WHOLE or row.error):
            out += _over(row, "group", bound)
    return out


def _over(row: LinkPartitionLag | GroupPartitionLag, kind: str, bound: Bound) -> list[Violation]:
    if bound.records is None and bound.seconds is None:
        return []
    if row.error:
        return [Violation(kind, row.where, f"{row.where}: {row.error}")]
    if row.records is None:
        return []
    phrases = bound.exceeded(row.records, row.seconds or 0.0)
    if bound.seconds is not None and row.seconds is None:
        # records are pending but their age could not be read: the bound cannot be shown to hold
        phrases.append(f"age unknown ({row.note or 'not read'}) with a bound of {bound.seconds}s")
    return [Violation(kind, row.where, f"{row.where}: {'; '.join(phrases)}")] if phrases else []


def evaluate(config: LagConfig, links: Iterable[LinkPartitionLag], groups: Iterable[GroupPartitionLag]
             ) -> list[Violation]:
    """Every violation of the topology's ``lag`` settings (``sla``, ``links.<id>``, ``groups`` rules)."""
    out = link_violations(links, config.link_bound)
    out += group_violations(groups, config.group_bound, any_bound=bool(config.groups))
    return out


# --------------------------------------------------------------------------- snapshot


@dataclass
class LagSnapshot:
    """One measurement: the rows, the SLA violations, and what could not be reached."""

    taken_at: datetime
    topology: str
    links: list[LinkPartitionLag] = field(default_factory=list)
    groups: list[GroupPartitionLag] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    sla: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations

    def totals(self) -> dict[str, Any]:
        measured = [r for r in self.links if r.records is not None]
        group_rows = [r for r in self.groups if r.records is not None]
        return {
            "links": len({r.link_id for r in self.links}),
            "link_partitions": len(measured),
            "lagging_link_partitions": sum(1 for r in measured if r.records),
            "link_records": sum(r.records for r in measured),
            "link_max_seconds": max((r.seconds or 0.0 for r in measured), default=0.0),
            "groups": len({(r.cluster, r.group) for r in self.groups if r.group != WHOLE}),
            "group_partitions": len(group_rows),
            "group_records": sum(r.records for r in group_rows),
            "group_max_seconds": max((r.seconds or 0.0 for r in group_rows), default=0.0),
            "errors": sum(1 for r in [*self.links, *self.groups] if r.error),
            "unreachable": sorted(self.unreachable),
            "violations": len(self.violations),
        }

    def per_link(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.links:
            s = out.setdefault(r.link_id, {"level": r.level, "source": r.source, "target": r.target, "partitions": 0,
                                           "records": 0, "max_seconds": 0.0, "errors": []})
            if r.error:
                s["errors"].append(r.error if r.topic == WHOLE else f"{r.topic}[{r.partition}]: {r.error}")
            if r.records is not None:
                s["partitions"] += 1
                s["records"] += r.records
                s["max_seconds"] = max(s["max_seconds"], r.seconds or 0.0)
        return out

    def per_group(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.groups:
            if r.group == WHOLE:
                continue
            s = out.setdefault(f"{r.cluster}/{r.group}", {
                "cluster": r.cluster, "group": r.group, "state": r.state, "members": r.members, "partitions": 0,
                "records": 0, "max_seconds": 0.0, "errors": []})
            if r.error:
                s["errors"].append(r.error)
            if r.records is not None:
                s["partitions"] += 1
                s["records"] += r.records
                s["max_seconds"] = max(s["max_seconds"], r.seconds or 0.0)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able snapshot (see docs/lag.md for its format)."""
        return {
            "taken_at": self.taken_at.isoformat(),
            "topology": self.topology,
            "duration_s": round(self.duration_s, 3),
            "ok": self.ok,
            "totals": self.totals(),
            "per_link": self.per_link(),
            "per_group": self.per_group(),
            "links": [asdict(r) for r in self.links],
            "groups": [asdict(r) for r in self.groups],
            "unreachable": self.unreachable,
            "sla": self.sla,
            "violations": [str(v) for v in self.violations],
        }


def measure(topology: Topology, clients: Mapping[str, ClusterClient], links: Iterable[Distributor], *,
            topics: Iterable[str] | None = None, groups: Callable[[str], bool] | None = None,
            group_clusters: Iterable[str] | None = None, unavailable: Mapping[str, str] | None = None,
            now: datetime | None = None, timeout: float = DEFAULT_TIMEOUT) -> LagSnapshot:
    """Link lag of ``links``, group lag on ``group_clusters`` (default: every cluster), and the SLA verdict.

    ``groups`` defaults to the topology's offsets selection; ``unavailable`` names
    clusters the caller could not even build a client for (with the reason).
    """
    started = time.monotonic()
    now = now or datetime.now(timezone.utc)
    reach = Clusters(clients, unavailable, timeout)
    names = sorted(group_clusters) if group_clusters is not None else sorted(topology.clusters)
    links = list(links)
    reach.probe([*names, *(c for l in links for c in (l.source, l.default_target))])
    link_rows = link_lag(topology, reach, links, topics, now, timeout=timeout)
    group_rows = group_lag(reach, groups if groups is not None else topology.offsets.selects, now, clusters=names,
                           timeout=timeout)
    return LagSnapshot(
        taken_at=now, topology=topology.name, links=link_rows, groups=group_rows, unreachable=reach.unreachable,
        violations=evaluate(topology.lag, link_rows, group_rows),
        sla=topology.lag.model_dump(mode="json", exclude_defaults=True), duration_s=time.monotonic() - started,
    )


# --------------------------------------------------------------------------- tables


def link_table(rows: Iterable[LinkPartitionLag], *, only_lagging: bool = False, limit: int | None = None) -> str:
    """A fixed-width table of link rows for task logs and sensor failures."""
    header = ("link", "source", "target", "topic", "part", "records", "seconds", "checkpoint", "end", "note")
    body = [(r.link_id, r.source, r.target, r.topic, "" if r.partition is None else str(r.partition),
             "-" if r.records is None else str(r.records), _secs(r.seconds),
             "-" if r.checkpoint is None else str(r.checkpoint), "-" if r.end is None else str(r.end),
             r.error or r.note or "")
            for r in rows if not only_lagging or r.error or r.records]
    return _table(header, body, limit)


def group_table(rows: Iterable[GroupPartitionLag], *, only_lagging: bool = False, limit: int | None = None) -> str:
    """A fixed-width table of group rows for task logs and sensor failures."""
    header = ("cluster", "group", "state", "members", "topic", "part", "records", "seconds", "committed", "end",
              "note")
    body = [(r.cluster, r.group, r.state or "-", "-" if r.members is None else str(r.members), r.topic,
             "" if r.partition is None else str(r.partition), "-" if r.records is None else str(r.records),
             _secs(r.seconds), "-" if r.committed is None else str(r.committed), "-" if r.end is None else str(r.end),
             r.error or r.note or "")
            for r in rows if not only_lagging or r.error or r.records]
    return _table(header, body, limit)


def _table(header: tuple[str, ...], body: list[tuple[str, ...]], limit: int | None) -> str:
    if not body:
        return "(no rows)"
    more = 0
    if limit is not None and len(body) > limit:
        body, more = body[:limit], len(body) - limit
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *body]]
    if more:
        lines.append(f"... {more} more rows")
    return "\n".join(lines)


# --------------------------------------------------------------------------- helpers


def _matcher(patterns: Iterable[str] | None) -> Callable[[str], bool]:
    """Names or regexes, full match; ``None`` matches everything."""
    if patterns is None:
        return lambda _name: True
    items = list(patterns)
    compiled = []
    for p in items:
        try:
            compiled.append(re.compile(p))
        except re.error as exc:
            raise MirrorflowError(f"topic pattern {p!r} is not a valid regex: {exc}") from None
    return lambda name: name in items or any(c.fullmatch(name) for c in compiled)


def _epoch_ms(now: datetime | None) -> int:
    now = now or datetime.now(timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    return int(now.timestamp() * 1000)


def _secs(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _join(a: str | None, b: str) -> str:
    return b if not a else f"{a}; {b}"
