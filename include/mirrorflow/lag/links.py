"""Link lag: how far each link's checkpoint on its current target is behind its source.

Records count from where the link resumes (its checkpoint, clamped to the
source's first offset) to the source's last stable offset (the end a
``read_committed`` copier can reach); offsets the copier will skip (copy flags)
count too, since they are not behind the checkpoint yet. docs/lag.md says what
each number means and how many requests a measurement makes.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from confluent_kafka import TopicPartition

from mirrorflow.copy.state import read_checkpoints, switched_to
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import ClusterClient, offsets_or_errors
from mirrorflow.lag.ages import epoch_ms, fill_ages, fill_open_transactions
from mirrorflow.lag.reach import DEFAULT_TIMEOUT, Clusters, side_by_side
from mirrorflow.lag.rows import WHOLE, LinkPartitionLag, join_notes, open_transaction
from mirrorflow.topology import Distributor, Topology

#: A link's checkpoints: ``(topic, partition) -> (committed offset or None, metadata)``.
Checkpoints = dict[tuple[str, int], tuple[int | None, str]]


def link_lag(topology: Topology, clients: Mapping[str, ClusterClient] | Clusters, links: Iterable[Distributor],
             topics: Iterable[str] | None = None, now: datetime | None = None, *,
             timeout: float = DEFAULT_TIMEOUT,
             had_checkpoint: Callable[[str, str, int], bool] | None = None,
             ages: bool = True) -> list[LinkPartitionLag]:
    """Lag of each link on each selected topic-partition of its source.

    ``links`` carry their *effective* target (see
    :func:`mirrorflow.topology.effective_links`): the checkpoint there is the
    authoritative position. ``topics`` (names or regexes, full match) narrows the
    topology's topics. A link whose source or target cannot be measured gets one
    row with ``topic == "*"`` and the reason in ``error``. ``had_checkpoint(link, topic,
    partition)`` says whether the previous measurement found a checkpoint there (or
    already missed one): a checkpoint that vanished since is flagged. ``ages=False``
    reads no message and asks the sources for their stable ends alone (the earliest
    offset only where a checkpoint is behind): ``seconds``, the open transactions and
    what they hold back (``held``) stay unknown (the ``on_data`` watcher's cheap poll).
    """
    now_ms = epoch_ms(now)
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

    # one read of offsets per source cluster for the partitions of all its links, and every link's checkpoints:
    # independent questions, all asked at once (the sources side by side, the links side by side)
    kinds = ("earliest", "stable", "high") if ages else ("stable",)
    with ThreadPoolExecutor(1, thread_name_prefix="mirrorflow-lag-checkpoints") as pool:
        asked = pool.submit(contextvars.copy_context().run, _checkpoints, reach, measured, timeout)
        offsets = _source_offsets(reach, _by_source(measured), kinds, timeout)
        checkpoints_of = asked.result()

    read: list[tuple[Distributor, list[TopicPartition], Checkpoints]] = []
    for link, tps in measured:
        answer = checkpoints_of[link.link_id]
        if isinstance(answer, MirrorflowError):
            rows.append(_link_error(link, f"checkpoints not read: {answer}"))
        else:
            read.append((link, tps, answer))
    if not ages:
        _add_earliest(reach, read, offsets, timeout)

    pending: list[LinkPartitionLag] = []
    held: list[LinkPartitionLag] = []  # records wait behind an open transaction
    for link, tps, checkpoints in read:
        for tp in tps:
            key = (tp.topic, tp.partition)
            row = LinkPartitionLag(link.link_id, link.level, link.source, link.default_target, tp.topic, tp.partition,
                                   records=None)
            found = offsets[link.source][key]
            if isinstance(found, str):
                row.error = f"source offsets not read: {found}"
                rows.append(row)
                continue
            low, end, high = found
            high = max(end, high)  # a high watermark read before the stable end may be behind it
            checkpoint, meta = checkpoints.get(key, (None, ""))
            new_target = switched_to(meta)
            if new_target is not None:
                row.note = (f"the checkpoint on {link.default_target} says the link was switched to "
                            f"{new_target}: the effective target given is stale")
            row.checkpoint, row.end = checkpoint, end
            if checkpoint is None and had_checkpoint is not None and had_checkpoint(link.link_id, *key):
                row.checkpoint_missing = True
                row.note = join_notes(row.note, f"the link's checkpoint on {link.default_target} is gone (it was "
                                                f"there at the previous measurement)")
            row.start = low if checkpoint is None or checkpoint < low else checkpoint
            if checkpoint is not None and checkpoint < low:
                row.gap = low - checkpoint
                lost = f"{row.gap} offsets were deleted by retention before being copied"
                row.note = join_notes(row.note, lost)
            if row.start > end:
                row.truncated = True
                row.note = join_notes(row.note, f"checkpoint {row.start} is past the source's end {end} (truncated?)")
            row.high = high
            row.held = high - end if row.start <= end else 0
            row.records = max(0, end - row.start) + row.held
            row.seconds = 0.0 if row.records == 0 else None
            rows.append(row)
            if end > row.start:
                pending.append(row)
            if row.held:
                held.append(row)
    if not ages:
        return rows
    fill_ages(reach, pending, lambda r: r.source, lambda r: r.start, now_ms, timeout)
    fill_open_transactions(reach, held, lambda r: r.source, now_ms, timeout)
    for row in held:
        row.note = join_notes(row.note, open_transaction(row))
    return rows


def _by_source(measured: list[tuple[Distributor, list[TopicPartition]]]) -> dict[str, set[tuple[str, int]]]:
    """Each source cluster's partitions, over all its links (logical names)."""
    union: dict[str, set[tuple[str, int]]] = {}
    for link, tps in measured:
        union.setdefault(link.source, set()).update((tp.topic, tp.partition) for tp in tps)
    return union


def _checkpoints(reach: Clusters, measured: list[tuple[Distributor, list[TopicPartition]]], timeout: float
                 ) -> dict[str, Checkpoints | MirrorflowError]:
    """Each link's checkpoints on its target (or why they were not read), the links side by side."""
    by_id = {link.link_id: (link, tps) for link, tps in measured}

    def one(link_id: str) -> Checkpoints | MirrorflowError:
        link, tps = by_id[link_id]
        try:
            return read_checkpoints(reach.clients[link.default_target], link_id, tps, timeout) if tps else {}
        except MirrorflowError as exc:
            return exc

    return side_by_side(one, by_id, "checkpoints")


def _source_offsets(reach: Clusters, wanted: Mapping[str, set[tuple[str, int]]], kinds: tuple[str, ...],
                    timeout: float) -> dict[str, dict[tuple[str, int], tuple[int, ...] | str]]:
    """``kinds`` of offsets of each source's partitions (logical names), the sources asked side by side."""
    def one(source: str) -> dict[tuple[str, int], tuple[int, ...] | str]:
        client = reach.clients[source]
        asked = {(client.physical(t), p): (t, p) for t, p in wanted[source]}  # by the source's names
        return {asked[key]: value for key, value in offsets_or_errors(client, sorted(asked), kinds, timeout).items()}

    return side_by_side(one, wanted, "offsets")


def _add_earliest(reach: Clusters, read: list[tuple[Distributor, list[TopicPartition], dict]],
                  offsets: dict[str, dict[tuple[str, int], tuple[int, ...] | str]], timeout: float) -> None:
    """Turn the stable ends alone into ``(earliest, stable, stable)``, asking the earliest offset only where it
    can matter: where the checkpoint is behind the end, or missing on a partition that holds records.

    Elsewhere nothing waits and the copy's start is the checkpoint itself (a checkpoint at or past the end is
    not behind the log's start), or 0 on an empty partition without one. The high watermark is not asked
    (the watcher's poll counts what a copy can take now, not what an open transaction holds back).
    """
    wanted: dict[str, set[tuple[str, int]]] = {}
    for link, tps, checkpoints in read:
        for tp in tps:
            key = (tp.topic, tp.partition)
            found = offsets[link.source][key]
            if isinstance(found, str):
                continue
            checkpoint = checkpoints.get(key, (None, ""))[0]
            if (found[0] > 0) if checkpoint is None else checkpoint < found[0]:
                wanted.setdefault(link.source, set()).add(key)
    earliest = _source_offsets(reach, wanted, ("earliest",), timeout)
    for source, answers in offsets.items():
        for key, found in answers.items():
            if isinstance(found, str):
                continue
            low = earliest.get(source, {}).get(key)
            answers[key] = low if isinstance(low, str) else (0 if low is None else low[0], found[0], found[0])


def _link_error(link: Distributor, error: str) -> LinkPartitionLag:
    return LinkPartitionLag(link.link_id, link.level, link.source, link.default_target, WHOLE, None, records=None,
                            error=error)


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
