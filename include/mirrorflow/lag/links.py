"""Link lag: how far each link's checkpoint on its current target is behind its source.

Records count from where the link resumes (its checkpoint, clamped to the
source's first offset) to the source's last stable offset (the end a
``read_committed`` copier can reach); offsets the copier will skip (copy flags)
count too, since they are not behind the checkpoint yet. docs/lag.md says what
each number means and how many requests a measurement makes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from confluent_kafka import TopicPartition

from mirrorflow.copy.state import read_checkpoints, switched_to
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import ClusterClient, earliest_and_stable_or_errors
from mirrorflow.lag.ages import epoch_ms, fill_ages, fill_open_transactions
from mirrorflow.lag.reach import DEFAULT_TIMEOUT, Clusters
from mirrorflow.lag.rows import WHOLE, LinkPartitionLag, join_notes, open_transaction
from mirrorflow.topology import Distributor, Topology


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
    reads no message (offsets and checkpoints only): ``seconds`` and the open
    transactions' ages stay unknown (the ``on_data`` watcher's cheap poll).
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

    # one pair of list-offsets requests per source cluster, for the partitions of all its links
    offsets: dict[str, dict[tuple[str, int], tuple[int, int, int] | str]] = {}
    for source in sorted({link.source for link, _ in measured}):
        union = {(tp.topic, tp.partition) for link, tps in measured if link.source == source for tp in tps}
        source_client = reach.clients[source]
        asked = {(source_client.physical(t), p): (t, p) for t, p in union}  # by the source's names
        answered = earliest_and_stable_or_errors(source_client, sorted(asked), timeout)
        offsets[source] = {asked[key]: value for key, value in answered.items()}

    pending: list[LinkPartitionLag] = []
    held: list[LinkPartitionLag] = []  # records wait behind an open transaction
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
            low, end, high = found
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
