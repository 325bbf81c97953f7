"""The two halves of ``mirror_offsets``: publish positions on the owner, commit them elsewhere.

Ownership (which cluster a group runs on) is decided by the caller from the
groups' members on every cluster and remembered between runs (the Airflow side
keeps it in a Variable); this module only needs the answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from mirrorflow.journal import journal_entry
from mirrorflow.kafka import ClusterClient, logical_earliest_and_stable, mirrored_topics
from mirrorflow.offsets import frontier as _frontier
from mirrorflow.offsets.groups import GroupInfo, commit, committed, cut_metadata
from mirrorflow.offsets.position import Position, key_of
from mirrorflow.offsets.topic import publish, read_positions
from mirrorflow.offsets.translate import Translation, translate

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


def owners_from(infos: Mapping[str, Mapping[str, GroupInfo]], remembered: Mapping[str, str]
                ) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Owner of every group: the one cluster where it has members, else the remembered owner.

    ``infos`` is cluster -> group -> info. Returns (owners, conflicts) where
    conflicts lists groups active on several clusters at once: mirrorflow
    leaves those alone (which copy is right is the operator's call).
    """
    owners = dict(remembered)
    conflicts: dict[str, list[str]] = {}
    groups = {g for per in infos.values() for g in per}
    for group in sorted(groups):
        active = sorted(c for c, per in infos.items() if group in per and per[group].active)
        if len(active) == 1:
            owners[group] = active[0]
        elif len(active) > 1:
            conflicts[group] = active
    return owners, conflicts


def _topic_partitions(client: ClusterClient, selects_topic: Callable[[str], bool]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, n in sorted(mirrored_topics(client).items()) if selects_topic(t)
            for p in range(n)]


def current_positions(client: ClusterClient, groups: Iterable[str], selects_topic: Callable[[str], bool],
                      previous: Mapping[bytes, Position]) -> list[Position]:
    """Portable positions of ``groups`` as committed on ``client``'s cluster (their owner), not yet published.

    The frontier continues from the previous record of the same key when the
    group only moved forward since, so each publish scans only what the group
    consumed in between.
    """
    tps = _topic_partitions(client, selects_topic)
    out: list[Position] = []
    if not tps:
        return out
    lows, ends = logical_earliest_and_stable(client, tps)
    stamp = now_ms()
    with _frontier.Scanner(client) as scanner:
        for group in groups:
            for (topic, partition), (offset, _meta) in sorted(committed(client, group, tps).items()):
                low, end = lows[(topic, partition)], ends[(topic, partition)]
                upto = min(offset, end)
                prev = previous.get(key_of(client.name, group, topic, partition))
                if prev is not None and low <= prev.frontier_offset <= upto:
                    front, ts = _frontier.advance(client, topic, partition, prev.frontier, prev.frontier_offset, upto,
                                                  scanner=scanner)
                    ts = ts if ts is not None else prev.timestamp_ms
                else:
                    front, ts = _frontier.initial_frontier(client, topic, partition, low, upto, scanner=scanner)
                out.append(Position(group=group, topic=topic, partition=partition, owner=client.name, offset=offset,
                                    timestamp_ms=ts, frontier=front, frontier_offset=upto, published_at_ms=stamp,
                                    seq=(prev.seq + 1) if prev is not None else 1))
    return out


def publish_owned(client: ClusterClient, groups: Iterable[str], selects_topic: Callable[[str], bool]
                  ) -> list[Position]:
    """Compute and publish the positions of the groups this cluster owns."""
    groups = list(groups)
    if not groups:
        return []
    previous = read_positions(client)
    positions = current_positions(client, groups, selects_topic, previous)
    publish(client, positions)
    for group in groups:
        mine = [p for p in positions if p.group == group]
        journal_entry("offsets_publish", cluster=client.name, group=group, partitions=len(mine),
                      positions=[{"topic": p.topic, "partition": p.partition, "offset": p.offset, "seq": p.seq}
                         for p in mine])
    return positions


@dataclass
class CommitRow:
    group: str
    topic: str
    partition: int
    owner: str
    owner_offset: int
    before: int | None
    after: int
    precision: str
    how: str
    published_at_ms: int

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass
class CommitReport:
    cluster: str
    rows: list[CommitRow] = field(default_factory=list)
    #: group -> why it was left alone on this cluster
    skipped: dict[str, str] = field(default_factory=dict)


def plan_commits(client: ClusterClient, positions: Iterable[Position],
                 precision_for: Callable[[str], tuple[str, float]], *,
                 scanner: _frontier.Scanner | None = None) -> list[CommitRow]:
    """Resolve ``positions`` (all of one owner, for groups idle here) to offsets on ``client``'s cluster.

    Its scans go through ``scanner``, or through one of the call's own.
    """
    if scanner is None:
        with _frontier.Scanner(client) as own:
            return plan_commits(client, positions, precision_for, scanner=own)
    positions = [p for p in positions if p.owner != client.name]
    if not positions:
        return []
    topics = mirrored_topics(client)
    present = [p for p in positions if p.partition < topics.get(p.topic, 0)]
    for p in positions:
        if p not in present:
            log.warning("%s: %s[%d] does not exist here yet; group %s is positioned there on a later run",
                        client.name, p.topic, p.partition, p.group)
    tps = sorted({(p.topic, p.partition) for p in present})
    if not tps:
        return []
    lows, ends = logical_earliest_and_stable(client, [TopicPartition(t, q) for t, q in tps])
    rows = []
    by_group: dict[str, list[Position]] = {}
    for p in present:
        by_group.setdefault(p.group, []).append(p)
    for group, mine in sorted(by_group.items()):
        current = committed(client, group, [TopicPartition(p.topic, p.partition) for p in mine])
        precision, margin = precision_for(group)
        for p in sorted(mine, key=lambda x: (x.topic, x.partition)):
            key = (p.topic, p.partition)
            res: Translation = translate(client, p, precision, margin, lows[key], ends[key], current.get(key),
                                         scanner=scanner)
            before = current[key][0] if key in current else None
            rows.append(CommitRow(group, p.topic, p.partition, p.owner, p.offset, before, res.offset, res.precision,
                                  res.how, p.published_at_ms))
    return rows


def apply_commits(client: ClusterClient, rows: Iterable[CommitRow]) -> list[CommitRow]:
    """Commit the rows that change something; one commit (and one journal line) per group. Returns what changed."""
    changed = [r for r in rows if r.changed]
    by_group: dict[str, list[CommitRow]] = {}
    for r in changed:
        by_group.setdefault(r.group, []).append(r)
    for group, mine in sorted(by_group.items()):
        commit(client, group, {(r.topic, r.partition): (r.after, cut_metadata(r.owner, r.owner_offset)) for r in mine})
        journal_entry("offsets_commit", cluster=client.name, group=group, owner=mine[0].owner,
                      precision=mine[0].precision,
                      partitions=[{"topic": r.topic, "partition": r.partition, "from": r.before, "to": r.after,
                           "owner_offset": r.owner_offset} for r in mine])
    return changed


def commit_positions(client: ClusterClient, owners: Mapping[str, str], idle: Callable[[str], bool],
                     precision_for: Callable[[str], tuple[str, float]], groups: Iterable[str] | None = None
                     ) -> CommitReport:
    """The committer of one cluster: apply the owners' latest positions to groups idle here."""
    report = CommitReport(client.name)
    wanted = set(groups) if groups is not None else None
    positions = []
    for pos in read_positions(client).values():
        if wanted is not None and pos.group not in wanted:
            continue
        if owners.get(pos.group) != pos.owner or pos.owner == client.name:
            continue  # an earlier owner's record, or this cluster's own
        if not idle(pos.group):
            report.skipped[pos.group] = f"active on {client.name}"
            continue
        positions.append(pos)
    report.rows = apply_commits(client, plan_commits(client, positions, precision_for))
    return report
