"""Moving consumer groups from one cluster to another on purpose (planned or emergency).

Planned: the group has stopped on the source; its final positions are
published and distributed, the caller waits until the target holds every
message the group consumed (:func:`missing_on_target`), then the cut is
committed on the target and verified. Emergency: the source is gone; the last
positions that reached the target are used, and their age says how much the
group may replay (everything it consumed on the source since then).
Either way nothing is skipped: the exact cut is proven, and the timestamp cut
lands a margin before the last consumed message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field

from confluent_kafka import TopicPartition

from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import ClusterClient, logical_earliest_and_stable, mirrored_topics
from mirrorflow.offsets import frontier as _frontier
from mirrorflow.offsets.groups import GroupActiveError, committed, describe
from mirrorflow.offsets.position import Position
from mirrorflow.offsets.sync import CommitRow, now_ms, plan_commits
from mirrorflow.offsets.topic import read_positions

MODES = ("planned", "emergency")


class FailoverRefused(MirrorflowError):
    """The failover would be unsafe as asked; nothing was changed."""


def match_groups(patterns: Iterable[str], candidates: Iterable[str]) -> list[str]:
    """Groups that equal or fully match one of ``patterns``."""
    pats = [p.strip() for p in patterns if p and p.strip()]
    if not pats:
        raise FailoverRefused("groups: give at least one consumer group name or regex")
    for p in pats:
        try:
            re.compile(p)
        except re.error as exc:
            raise FailoverRefused(f"groups: {p!r} is not a valid regex: {exc}") from None
    return sorted(g for g in set(candidates) if any(p == g or re.fullmatch(p, g) for p in pats))


def refuse_active(client: ClusterClient, groups: Iterable[str], where: str) -> None:
    """Raise naming every group that has members on ``client``'s cluster."""
    active = [i for i in describe(client, groups).values() if i.active]
    if active:
        listed = ", ".join(f"{i.group} ({i.members} member(s), {i.state})" for i in active)
        raise FailoverRefused(f"consumer groups still active on {where} {client.name}: {listed}. Stop their "
                              f"consumers first" + (" or set force" if where == "source" else ""))


#: ``group -> {"topic[partition]": committed offset}``: the cut a planned failover's plan assumes on the source.
SourceCut = dict[str, dict[str, int]]


def _slot(topic: str, partition: int) -> str:
    return f"{topic}[{partition}]"


def source_cut(client: ClusterClient, groups: Iterable[str], selects_topic: Callable[[str], bool]) -> SourceCut:
    """The groups' committed offsets on the source now, per mirrored partition (what the plan is made of)."""
    tps = [TopicPartition(t, p) for t, n in sorted(mirrored_topics(client).items()) if selects_topic(t)
           for p in range(n)]
    return {g: {_slot(t, p): off for (t, p), (off, _meta) in sorted(committed(client, g, tps).items())}
            for g in groups}


def _moves(assumed: Mapping[str, Mapping[str, int]], now: Mapping[str, Mapping[str, int]]) -> list[str]:
    """``group topic[p] before -> now`` for every partition whose cut differs (``none``: no commit)."""
    out = []
    for group in sorted(set(assumed) | set(now)):
        was, is_ = assumed.get(group, {}), now.get(group, {})
        out += [f"{group} {slot} {was.get(slot, 'none')} -> {is_.get(slot, 'none')}"
                for slot in sorted(set(was) | set(is_)) if was.get(slot) != is_.get(slot)]
    return out


def recheck_source(client: ClusterClient, groups: Iterable[str], assumed: SourceCut | None,
                   selects_topic: Callable[[str], bool]) -> None:
    """Right before a planned failover acts: the source still as its plan assumed, else :class:`FailoverRefused`.

    An approval can wait an hour: applications restarted on the source in the
    meantime consume and commit, and the target would read their messages
    again. So no group may have members there, and (when the plan recorded it)
    every committed offset must be the one the plan was made of.
    """
    groups = list(groups)
    try:
        active = [i for i in describe(client, groups).values() if i.active]
        now = source_cut(client, groups, selects_topic) if assumed is not None else None
    except MirrorflowError as exc:
        raise FailoverRefused(f"the source {client.name} could not be checked again before acting ({exc}); a planned "
                              "failover needs it. Re-run, or use mode emergency") from None
    if active:
        listed = ", ".join(f"{i.group} ({i.members} member(s), {i.state})" for i in active)
        raise FailoverRefused(f"the plan is stale: consumer groups became active again on the source {client.name} "
                              f"since it was made: {listed}. Stop their consumers and run the failover again")
    moved = _moves(assumed, now) if assumed is not None and now is not None else []
    if moved:
        raise FailoverRefused(f"the plan is stale: the groups' committed offsets on the source {client.name} moved "
                              f"since it was made: {'; '.join(moved)}. Run the failover again")


def stale_positions(positions: Iterable[Position], assumed: SourceCut) -> list[str]:
    """Positions about to be committed that are not the plan's cut (``group topic[p] planned -> position``)."""
    now: dict[str, dict[str, int]] = {}
    for p in positions:
        now.setdefault(p.group, {})[_slot(p.topic, p.partition)] = p.offset
    # only partitions both know: a leftover record of a partition the group no longer commits is not a move
    planned = {g: {s: o for s, o in assumed.get(g, {}).items() if s in slots} for g, slots in now.items()}
    return _moves(planned, {g: {s: o for s, o in slots.items() if s in planned[g]} for g, slots in now.items()})


def distributed_positions(target: ClusterClient, owner: str, groups: Iterable[str]) -> list[Position]:
    """The newest positions of ``groups`` published by ``owner`` that have reached ``target``."""
    wanted = set(groups)
    return sorted((p for p in read_positions(target).values() if p.owner == owner and p.group in wanted),
                  key=lambda p: (p.group, p.topic, p.partition))


def missing_on_target(target: ClusterClient, positions: Iterable[Position], *,
                      scanner: _frontier.Scanner | None = None) -> dict[str, list[str]]:
    """``"group topic[p]" -> origins`` whose last consumed message the target does not hold yet."""
    if scanner is None:
        with _frontier.Scanner(target) as own:
            return missing_on_target(target, positions, scanner=own)
    positions = list(positions)
    present = _present(target, positions)
    out: dict[str, list[str]] = {}
    if not present:
        return {f"{p.group} {p.topic}[{p.partition}]": ["topic partition missing on target"] for p in positions}
    lows, ends = logical_earliest_and_stable(target, [TopicPartition(p.topic, p.partition) for p in present])
    for p in positions:
        name = f"{p.group} {p.topic}[{p.partition}]"
        if p not in present:
            out[name] = ["topic partition missing on target"]
            continue
        key = (p.topic, p.partition)
        gone = _frontier.missing_origins(target, p.topic, p.partition, p.frontier, lows[key], ends[key],
                                         scanner=scanner)
        if gone:
            out[name] = list(gone)
    return out


def _present(client: ClusterClient, positions: list[Position]) -> list[Position]:
    topics = mirrored_topics(client)
    return [p for p in positions if p.partition < topics.get(p.topic, 0)]


@dataclass
class FailoverRow:
    group: str
    topic: str
    partition: int
    source_offset: int
    target_before: int | None
    target_offset: int
    precision: str
    #: Messages at or after the new position that the group already consumed on the source.
    expected_replay: int
    position_age_s: float
    how: str


@dataclass
class FailoverPlan:
    source: str
    target: str
    mode: str
    precision: str
    groups: list[str]
    rows: list[FailoverRow] = field(default_factory=list)
    #: group topic[p] -> origins not yet on the target (planned: waited for; emergency: reported)
    missing: dict[str, list[str]] = field(default_factory=dict)

    def commit_rows(self) -> list[CommitRow]:
        return [CommitRow(r.group, r.topic, r.partition, self.source, r.source_offset, r.target_before,
                          r.target_offset, r.precision, r.how, 0) for r in self.rows]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> FailoverPlan:
        """The plan back from :meth:`to_dict` (it travels between tasks as XCom)."""
        fields = {k: v for k, v in data.items() if k not in ("rows",)}
        return cls(**fields, rows=[FailoverRow(**row) for row in data.get("rows", [])])


def plan_failover(target: ClusterClient, positions: list[Position], *, source: str, mode: str, precision: str,
                  margin_s: float, groups: list[str]) -> FailoverPlan:
    """Resolve every position on the target and count what each group would read again."""
    plan = FailoverPlan(source, target.name, mode, precision, groups)
    with _frontier.Scanner(target) as scanner:
        rows = plan_commits(target, positions, lambda _g: (precision, margin_s), scanner=scanner)
        by_key = {(p.group, p.topic, p.partition): p for p in positions}
        tps = [TopicPartition(r.topic, r.partition) for r in rows]
        ends = logical_earliest_and_stable(target, tps)[1] if tps else {}
        now = now_ms()
        for r in rows:
            pos = by_key[(r.group, r.topic, r.partition)]
            end = ends[(r.topic, r.partition)]
            replay = _frontier.replay_after(target, r.topic, r.partition, pos.frontier, r.after, end, scanner=scanner)
            plan.rows.append(FailoverRow(r.group, r.topic, r.partition, r.owner_offset, r.before, r.after,
                                         r.precision, replay, round((now - pos.published_at_ms) / 1000.0, 1), r.how))
        plan.missing = missing_on_target(target, positions, scanner=scanner) if positions else {}
    return plan


def verify(target: ClusterClient, plan: FailoverPlan) -> list[str]:
    """Problems found re-reading the target's committed offsets (empty when every row holds)."""
    problems = []
    by_group: dict[str, list[FailoverRow]] = {}
    for r in plan.rows:
        by_group.setdefault(r.group, []).append(r)
    for group, rows in sorted(by_group.items()):
        now = committed(target, group, [TopicPartition(r.topic, r.partition) for r in rows])
        for r in rows:
            got = now.get((r.topic, r.partition), (None, ""))[0]
            if got != r.target_offset:
                problems.append(f"{group} {r.topic}[{r.partition}] on {target.name}: committed {got}, "
                                f"expected {r.target_offset}")
    return problems


def table(plan: FailoverPlan) -> str:
    """The per-partition table the DAG logs."""
    head = ("group", "topic", "partition", f"{plan.source} position", f"{plan.target} before",
            f"{plan.target} position", "precision", "expected replay", "position age s")
    rows = [(r.group, r.topic, str(r.partition), str(r.source_offset),
             "-" if r.target_before is None else str(r.target_before), str(r.target_offset), r.precision,
             str(r.expected_replay), f"{r.position_age_s:.1f}") for r in plan.rows]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)


__all__ = ["FailoverPlan", "FailoverRefused", "FailoverRow", "GroupActiveError", "MODES", "SourceCut",
           "distributed_positions", "match_groups", "missing_on_target", "plan_failover", "recheck_source",
           "refuse_active", "source_cut", "stale_positions", "table", "verify"]
