"""What a planned failover of each consumer group would do now, per other cluster: a read-only preview.

``mirror_lag_monitor`` stores it next to the groups' lag (``failover`` in the
snapshot, docs/lag.md), for the status page. It is the failover's own plan, not
an estimate beside it:

- the positions are the ones the switch would read on the target: the owner's
  current commits as portable positions, as ``publish_final`` would publish them
  now (:func:`~mirrorflow.offsets.sync.current_positions`), over the older
  positions of the same owner and group already there (:func:`after_publish`);
- each target's table is :func:`~mirrorflow.offsets.failover.plan_failover`,
  with the form's defaults (mode ``planned``, the topology's default precision),
  whose ``expected_replay`` is what the switch logs and commits.

So **replay** is the sum of the plan's ``expected_replay``. **Skip** is 0 in the
``exact`` precision (the cut is proven: everything before it was consumed) and
unknown in the ``timestamp`` precision (Axual's rule is not a proof). Where the
target does not hold yet the last message the group consumed of some origin
(the plan's ``missing``), a planned failover first waits for replication, and
the replay is only known then: at least what the plan counts now.

Nothing is written anywhere: offsets, commits and messages are only read.

Cost: the preview runs with every measurement (every minute by default). A
plan's time is mostly fixed latency per partition (new clients, fetches that
wait at the end of a partition), so plans run a few at a time, and the preview
is bounded by :class:`Limits`: plans per measurement, partitions per group,
messages per plan (estimated from the lag rows already measured), and a time
after which no plan starts. What a limit leaves out says so in its ``why``;
nothing is read for it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from mirrorflow.kafka import ClusterClient
from mirrorflow.offsets.failover import FailoverPlan, plan_failover
from mirrorflow.offsets.frontier import FIRST_SCAN_LIMIT
from mirrorflow.offsets.groups import GroupInfo
from mirrorflow.offsets.position import Position, key_of
from mirrorflow.offsets.sync import current_positions, owners_from
from mirrorflow.offsets.topic import read_positions
from mirrorflow.topology import Topology

log = logging.getLogger(__name__)

#: ``group`` of a lag row that stands for a whole cluster whose groups were not measured.
WHOLE_CLUSTER = "*"


@dataclass(frozen=True)
class Limits:
    """What one preview may cost; the lag monitor runs it with every measurement."""

    #: Failover plans (group x target cluster) per preview; groups are taken in name order.
    plans: int = 24
    #: Partitions of a group (committed on its owner) per plan: a plan reads them one after the other on the
    #: target, each for about a second (three short reads: the cut, the replay, what is still missing).
    partitions: int = 8
    #: Messages one plan may read, estimated from the lag rows (the group's lag on the target, or the whole
    #: partition where it has no commit there; on the owner, what it consumed since its last published position).
    records: int = 100_000
    #: Seconds after which no plan starts (a started plan is not interrupted: the preview ends at most one
    #: plan later, about ``partitions`` seconds).
    seconds: float = 10.0
    #: Plans made at once: a plan mostly waits on the target (new clients, fetches), so a few overlap well.
    threads: int = 8


class GroupRow(Protocol):
    """The fields of a consumer-group lag row (``mirrorflow.lag.GroupPartitionLag``) the preview reads."""

    cluster: str
    group: str
    topic: str
    partition: int | None
    records: int | None
    committed: int | None
    end: int | None
    members: int | None


class Reader(Protocol):
    """Where the preview gets positions and plans (the clusters; a stand-in in unit tests)."""

    def published(self, cluster: str) -> Mapping[bytes, Position]: ...

    def positions(self, owner: str, group: str, published: Mapping[bytes, Position]) -> list[Position]: ...

    def plan(self, owner: str, target: str, group: str, positions: list[Position]) -> FailoverPlan: ...


class ClusterReader:
    """The preview read from the clusters, with the calls the failover DAG itself makes (read-only)."""

    def __init__(self, topology: Topology, clients: Mapping[str, ClusterClient]) -> None:
        self.topology, self.clients = topology, clients

    def published(self, cluster: str) -> Mapping[bytes, Position]:
        return read_positions(self.clients[cluster])

    def positions(self, owner: str, group: str, published: Mapping[bytes, Position]) -> list[Position]:
        # what publish_final would publish now (and what a dry run plans from)
        return current_positions(self.clients[owner], [group], self.topology.selects, published)

    def plan(self, owner: str, target: str, group: str, positions: list[Position]) -> FailoverPlan:
        # the switch's call, with the form's defaults: planned, the default precision, the group's margin
        return plan_failover(self.clients[target], positions, source=owner, mode="planned",
                             precision=self.topology.offsets.default_precision,
                             margin_s=self.topology.offsets.precision_for(group)[1], groups=[group])


@dataclass(frozen=True)
class Subject:
    """A group to preview: where it runs (or last ran), and where it has members now."""

    group: str
    owner: str | None
    active_on: tuple[str, ...]


def activity(rows: Iterable[GroupRow]) -> dict[str, dict[str, GroupInfo]]:
    """``cluster -> group -> GroupInfo`` from lag rows (an unknown member count counts as none)."""
    infos: dict[str, dict[str, GroupInfo]] = {}
    for r in rows:
        if r.group == WHOLE_CLUSTER:
            continue
        per = infos.setdefault(r.cluster, {})
        if r.group not in per or (r.members or 0) > per[r.group].members:
            per[r.group] = GroupInfo(r.group, "", r.members or 0)
    return infos


def subjects(rows: Iterable[GroupRow], remembered: Mapping[str, str], selects: Callable[[str], bool]
             ) -> list[Subject]:
    """Selected groups with a known owner, and groups active on several clusters, by name.

    The owner is ``mirror_offsets``' rule (:func:`~mirrorflow.offsets.sync.owners_from`): the one cluster
    where the group has members, else the remembered owner.
    """
    infos = activity(rows)
    owners, conflicts = owners_from(infos, remembered)
    out = []
    for group in sorted(set(owners) | set(conflicts)):
        if not selects(group):
            continue
        active = tuple(sorted(c for c, per in infos.items() if group in per and per[group].active))
        out.append(Subject(group, owners.get(group), active))
    return out


def _rows_of(rows: Iterable[GroupRow], cluster: str, group: str) -> dict[tuple[str, int], GroupRow]:
    return {(r.topic, r.partition): r for r in rows
            if r.cluster == cluster and r.group == group and r.partition is not None}


def owner_reads(rows: Iterable[GroupRow], subject: Subject, published: Mapping[bytes, Position],
                selects_topic: Callable[[str], bool]) -> int:
    """About how many messages the owner's positions take to compute (each partition scanned since the
    position last published there, or back up to ``FIRST_SCAN_LIMIT`` without one)."""
    assert subject.owner is not None
    total = 0
    for (topic, partition), r in _rows_of(rows, subject.owner, subject.group).items():
        if r.committed is None or not selects_topic(topic):
            continue
        upto = r.committed if r.end is None else min(r.committed, r.end)
        prev = published.get(key_of(subject.owner, subject.group, topic, partition))
        if prev is not None and prev.frontier_offset <= upto:
            total += upto - prev.frontier_offset
        else:
            total += min(upto, FIRST_SCAN_LIMIT)
    return total


def target_reads(rows: Iterable[GroupRow], subject: Subject, target: str, selects_topic: Callable[[str], bool]
                 ) -> int:
    """About how many messages a plan reads on ``target``: per partition the group committed on its owner,
    the group's lag there (cut, replay and wait all read from about its commit to the end), or, where it
    has no commit there, the owner's end offset (the first cut is searched from the earliest offset)."""
    assert subject.owner is not None
    rows = list(rows)
    theirs = _rows_of(rows, target, subject.group)
    total = 0
    for key, mine in _rows_of(rows, subject.owner, subject.group).items():
        if mine.committed is None or not selects_topic(key[0]):
            continue
        there = theirs.get(key)
        total += there.records if there is not None and there.records is not None else (mine.end or 0)
    return total


def after_publish(there: Mapping[bytes, Position], current: Iterable[Position], owner: str, group: str
                  ) -> list[Position]:
    """The positions of ``group`` the switch reads on a target after ``publish_final``.

    ``there`` is what the target holds (:func:`~mirrorflow.offsets.topic.read_positions`), ``current``
    what ``publish_final`` publishes now; the switch takes every position of the owner and group that
    reached the target (:func:`~mirrorflow.offsets.failover.distributed_positions`), the newest per key:
    the current ones, and older ones of keys the owner no longer publishes (a topic no longer selected
    or gone there), which a failover still positions.
    """
    merged = {p.key(): p for p in there.values() if p.owner == owner and p.group == group}
    merged.update({p.key(): p for p in current})
    return sorted(merged.values(), key=lambda p: (p.group, p.topic, p.partition))


def unknown(why: str) -> dict[str, Any]:
    """A target the preview cannot speak for, and why."""
    return {"replay": None, "skip": None, "why": why}


def summarize(plan: FailoverPlan, group: str) -> dict[str, Any]:
    """One target's entry from the failover's own plan: replay (the rows' ``expected_replay``) and skip."""
    replay = sum(r.expected_replay for r in plan.rows)
    why = []
    skip: int | None = 0
    if plan.precision != "exact":
        skip = None
        why.append(f"{plan.precision} precision: the cut is the last consumed CreateTime minus the margin, not "
                   f"proven from provenance, so what it skips is not known (messages written late with older "
                   f"timestamps are skipped)")
    entry: dict[str, Any] = {
        "replay": replay, "skip": skip, "precision": plan.precision, "partitions": len(plan.rows),
        "replay_by_partition": {f"{r.topic}[{r.partition}]": r.expected_replay for r in plan.rows
                                if r.expected_replay},
    }
    if plan.missing:
        waits = {name.removeprefix(f"{group} "): origins for name, origins in sorted(plan.missing.items())}
        entry.update(replay=None, replay_at_least=replay, waits_for=waits)
        why.insert(0, f"{plan.target} does not hold yet the last message the group consumed of {len(waits)} "
                      f"partition(s): a planned failover waits for replication first, then replays at least "
                      f"{replay}")
    entry["why"] = "; ".join(why) or None
    return entry


def preview_failovers(topology: Topology, clients: Mapping[str, ClusterClient], remembered: Mapping[str, str],
                      rows: Iterable[GroupRow], unreachable: Mapping[str, str], *, limits: Limits = Limits(),
                      reader: Reader | None = None, clock: Callable[[], float] = time.monotonic
                      ) -> dict[str, dict[str, Any]]:
    """``group -> {"owner", "active_on", "targets": {cluster: entry}}`` (docs/lag.md, "Snapshot format").

    ``remembered`` is the owners ``mirror_offsets`` and failovers recorded; ``rows`` and ``unreachable``
    are the measurement's consumer-group rows and unreachable clusters. First every group and target is
    sorted out from what the measurement already knows (reasons, limits: no plan is made for them); then
    the positions of the remaining groups, then their plans, each on ``limits.threads`` threads. A
    failure for one group or target becomes its ``why``; nothing here raises for one group.
    """
    rows = list(rows)
    reader = reader or ClusterReader(topology, clients)
    started = clock()
    out: dict[str, dict[str, Any]] = {}
    published: dict[str, Mapping[bytes, Position] | str] = {}
    work: list[_Work] = []
    planned = 0
    for subject in subjects(rows, remembered, topology.offsets.selects):
        entry: dict[str, Any] = {"owner": subject.owner, "active_on": list(subject.active_on), "targets": {}}
        out[subject.group] = entry
        try:
            todo = _triage(topology, rows, unreachable, subject, entry["targets"], reader, published, limits,
                           limits.plans - planned)
        except Exception as exc:  # one group's trouble must not cost the measurement or the other groups
            _failed(topology, subject, entry["targets"], f"preview failed: {type(exc).__name__}: {exc}")
            continue
        if todo:
            planned += len(todo[1])
            work.append(_Work(subject, todo[0], todo[1], entry["targets"]))

    def in_time(what: Callable[[], None], targets: dict[str, dict[str, Any]], names: Iterable[str]) -> None:
        if clock() - started >= limits.seconds:
            for name in names:
                targets[name] = unknown(f"not previewed: the preview's {limits.seconds:g}s per measurement were "
                                        f"spent (groups in name order)")
            return
        what()

    def read(cluster: str) -> None:
        try:
            published[cluster] = reader.published(cluster)
        except Exception as exc:
            published[cluster] = f"{type(exc).__name__}: {exc}"

    with ThreadPoolExecutor(max_workers=max(1, limits.threads), thread_name_prefix="mirrorflow-preview") as pool:
        list(pool.map(lambda w: in_time(lambda: _positions(reader, w), w.targets, w.names), work))
        jobs = [(w, name) for w in work if w.positions for name in w.names]
        # the positions each target holds already, once per cluster (the owners' were read above)
        list(pool.map(read, sorted({name for _w, name in jobs} - set(published))))
        list(pool.map(lambda job: in_time(lambda: _plan(reader, job[0], job[1], published[job[1]], clock),
                                          job[0].targets, [job[1]]), jobs))
    for entry in out.values():  # the clusters in name order, whichever plan finished first
        entry["targets"] = dict(sorted(entry["targets"].items()))
    for group, entry in out.items():
        log.info("failover preview of %s (owner %s): %s", group, entry["owner"] or "unknown", "; ".join(
            f"{t} replay {e['replay']} skip {e['skip']}" + (f" ({e['why']})" if e.get("why") else "")
            for t, e in entry["targets"].items()) or "no other cluster")
    left = sum(1 for e in out.values() for t in e["targets"].values() if str(t.get("why")).startswith("not previewed"))
    log.info("failover preview: %d plans for %d groups in %.2fs%s", len(jobs), len(out), clock() - started,
             f"; {left} group x cluster pairs left out by the limits ({limits})" if left else "")
    return out


@dataclass
class _Work:
    """A group whose plans are to be made: for which targets, and where its entries go."""

    subject: Subject
    published: Mapping[bytes, Position]
    names: list[str]
    targets: dict[str, dict[str, Any]]
    positions: list[Position] | None = None


def _targets(topology: Topology, subject: Subject) -> list[str]:
    return [c for c in sorted(topology.clusters) if c != subject.owner]


def _failed(topology: Topology, subject: Subject, targets: dict[str, dict[str, Any]], why: str) -> None:
    log.warning("failover preview of %s: %s", subject.group, why)
    for name in _targets(topology, subject):
        targets.setdefault(name, unknown(why))


def _triage(topology: Topology, rows: list[GroupRow], unreachable: Mapping[str, str], subject: Subject,
            targets: dict[str, dict[str, Any]], reader: Reader,
            published: dict[str, Mapping[bytes, Position] | str], limits: Limits, plans_left: int
            ) -> tuple[Mapping[bytes, Position], list[str]] | None:
    """The targets to plan for (and the owner's published positions), after giving every other target
    its reason from what the measurement already knows: who is active where, what is unreachable, the limits."""
    names = _targets(topology, subject)
    owner = subject.owner
    why: str | None = None
    known: Mapping[bytes, Position] = {}
    if len(subject.active_on) > 1:
        why = (f"active on {' and '.join(subject.active_on)} at once: mirrorflow leaves it alone, and a failover "
               f"refuses a group with members on its target")
    elif owner is None:
        why = "no known owner"
    elif owner not in topology.clusters:
        why = f"its owner {owner} is not in the topology"
    elif owner in unreachable:
        why = f"its owner, cluster {owner}, {unreachable[owner]}"
    else:
        if owner not in published:  # once per owner cluster, whatever the number of its groups
            try:
                published[owner] = reader.published(owner)
            except Exception as exc:
                published[owner] = f"{type(exc).__name__}: {exc}"
        found = published[owner]
        if isinstance(found, str):
            why = f"the positions published on {owner} were not read: {found}"
        else:
            known = found
            need = owner_reads(rows, subject, known, topology.selects)
            width = sum(1 for (topic, _p), r in _rows_of(rows, owner, subject.group).items()
                        if r.committed is not None and topology.selects(topic))
            if width > limits.partitions:
                why = (f"not previewed: the group committed on {width} partitions on {owner}; a plan reads each "
                       f"of them on the target in turn (about a second each), more than {limits.partitions} "
                       f"per measurement")
            elif need > limits.records:
                why = (f"not previewed: its positions on {owner} would read about {need} messages (no position "
                       f"published there since; mirror_offsets publishes one every run), more than "
                       f"{limits.records} per measurement")
    if why is not None:
        targets.update({t: unknown(why) for t in names})
        return None
    todo: list[str] = []
    for target in names:
        if target in unreachable:
            targets[target] = unknown(f"cluster {target} {unreachable[target]}")
            continue
        need = target_reads(rows, subject, target, topology.selects)
        if need > limits.records:
            targets[target] = unknown(f"not previewed: a plan would read about {need} messages on {target} (the "
                                      f"group's lag there, or whole partitions where it has no commit there yet), "
                                      f"more than {limits.records} per measurement")
        elif len(todo) >= plans_left:
            targets[target] = unknown(f"not previewed: at most {limits.plans} group x cluster plans per "
                                      f"measurement (groups in name order)")
        else:
            todo.append(target)
    return (known, todo) if todo else None


def _positions(reader: Reader, work: _Work) -> None:
    """The group's positions on its owner, once for all its targets (or every target's reason why not)."""
    owner = work.subject.owner
    assert owner is not None
    why = None
    try:
        work.positions = reader.positions(owner, work.subject.group, work.published)
        if not work.positions:
            why = f"no positions yet: the group has no committed offset on {owner} on the mirrored topics"
    except Exception as exc:
        why = f"its positions on {owner} were not read: {type(exc).__name__}: {exc}"
    if why is not None:
        work.positions = None
        work.targets.update({t: unknown(why) for t in work.names})


def _plan(reader: Reader, work: _Work, target: str, there: Mapping[bytes, Position] | str,
          clock: Callable[[], float]) -> None:
    """One target's entry from the failover's plan (or why there is none)."""
    owner, group = work.subject.owner, work.subject.group
    assert owner is not None and work.positions
    if isinstance(there, str):
        work.targets[target] = unknown(f"the positions on {target} were not read: {there}")
        return
    began = clock()
    try:
        entry = summarize(reader.plan(owner, target, group, after_publish(there, work.positions, owner, group)),
                          group)
    except Exception as exc:
        entry = unknown(f"the plan on {target} failed: {type(exc).__name__}: {exc}")
    entry["duration_s"] = round(clock() - began, 3)
    work.targets[target] = entry


__all__ = ["ClusterReader", "GroupRow", "Limits", "Reader", "Subject", "activity", "after_publish", "owner_reads",
           "preview_failovers", "subjects", "summarize", "target_reads", "unknown"]
