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

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from mirrorflow.completeness.store import AuditState, Position, write_topic
from mirrorflow.completeness.tally import Tallies, Tally, WindowKey, origin_of
from mirrorflow.copy.copies import CopyScanner
from mirrorflow.kafka.admin import earliest_and_stable, list_topics, topic_ids
from mirrorflow.kafka.config import ClusterClient

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
                  timeout: float = 30.0) -> ClusterCount:
    """Count every topic ``selects`` picks on ``client``'s cluster from ``state``'s positions, and store the result."""
    topics = {t: n for t, n in list_topics(client, timeout).items() if selects(t)}
    ids = topic_ids(client, list(topics), timeout)
    out = ClusterCount(client.name)
    for topic, partitions in sorted(topics.items()):
        out.topics.append(_count_topic(client, state, topic, partitions, ids.get(topic), timeout))
    out.tallies = state.tallies
    out.horizons = dict(state.horizons)
    return out


def _count_topic(client: ClusterClient, state: AuditState, topic: str, partitions: int, topic_id: str | None,
                 timeout: float) -> TopicCount:
    result = TopicCount(client.name, topic)
    dropped: list[WindowKey] = []
    stored = {p: state.positions.get((topic, p)) for p in range(partitions)}
    if any(pos is not None and pos.topic_id and topic_id and pos.topic_id != topic_id for pos in stored.values()):
        log.warning("%s: topic %s was recreated since its last audit: it is counted over from its first offset",
                    client.name, topic)
        result.restarted = True
        stored = {p: None for p in stored}
        dropped = [k for k in state.tallies.cells if k.topic == topic]
        for key in dropped:
            del state.tallies.cells[key]
        state.horizons.pop(topic, None)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    lows, ends = earliest_and_stable(client, tps, timeout)
    new = Tallies(state.window_s)
    positions: dict[int, Position] = {}
    horizon = state.horizons.get(topic)
    first_audit = all(pos is None for pos in stored.values())
    with CopyScanner(client) as scanner:
        for p in range(partitions):
            low, end = lows[(topic, p)], ends[(topic, p)]
            pos = stored[p]
            start = low if pos is None else pos.next
            hole = first_audit and low > 0
            if low > start:
                result.unaudited += low - start
                start = low
            first_ts = None
            for origin, msg in scanner.records(topic, p, timeout, first=start, end=end):
                _, ts = msg.timestamp()  # the origin's: copies are produced with it
                if first_ts is None:
                    first_ts = ts
                new.add(origin if origin is not None else origin_of(None, client.name, topic, p, msg.offset()), ts)
                result.read += 1
            if hole:  # what retention deleted before was never counted: from here on (or now, if nothing is left)
                since = first_ts if first_ts is not None else int(time.time() * 1000)
                horizon = since if horizon is None else max(horizon, since)
            if pos is None or end != pos.next or pos.topic_id != topic_id:
                positions[p] = Position(max(start, end), topic_id)
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
        write_topic(client, state.window_s, topic, positions, changed, new_horizon, timeout, dropped=dropped)
    for p, pos in positions.items():
        state.positions[(topic, p)] = pos
    return result
