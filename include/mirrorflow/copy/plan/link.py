"""A level run's plan: what each link copies in this run, cut into partition tasks.

uReplicator's controller/worker split without a consumer group: the driver (the
Spark job's main process, or any Python process for tests and dry runs) does
every admin call, per link:

1. keep the target's topics in the source's shape (create missing topics, add
   partitions the source gained; conflicts and failures block only their topic);
2. list the source's selected topic-partitions, read the link's checkpoints on
   the target (one request), and capture each partition's last stable offset
   (one request): that is the run's planned end, so a run is a bounded batch;
3. apply where each copy starts (:func:`mirrorflow.copy.state.checkpoints.copy_start`,
   the rule the copier applies too), and cap each range by the per-run limits
   (:mod:`mirrorflow.work`; :mod:`mirrorflow.copy.job` packs them into Spark tasks).

A link whose clusters fail is reported and the other links still planned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirrorflow.copy.engine.fencing import attempt_checkpoints
from mirrorflow.copy.heal.archive import Heal, heal_plans, unavailable
from mirrorflow.copy.spec import JobSpec, LinkJob, LinkReport, PartitionError, link_fields
from mirrorflow.copy.state.checkpoints import (
    EARLIEST,
    carried_to,
    checkpoint_group,
    copy_start,
    needs_keep_alive,
    read_checkpoints,
    set_aside,
    source_recreated,
    switched_to,
)
from mirrorflow.copy.state.copies import find_copies
from mirrorflow.copy.state.held import held_on_target
from mirrorflow.copy.state.history import shorter
from mirrorflow.copy.state.recovery import recover_position
from mirrorflow.copy.task import PartitionTask
from mirrorflow.copy.txn_groups import txn_unit
from mirrorflow.defaults import DEFAULT_TXN_RECORDS, KEEP_ALIVE_FRACTION
from mirrorflow.errors import ClusterUnreachable, KafkaOperationError, MirrorflowError
from mirrorflow.journal import audit_warning
from mirrorflow.kafka.admin import (
    earliest_and_stable_or_leaderless,
    group_ids,
    list_topics,
    offsets_retention_s,
    probe,
    topic_ids,
)
from mirrorflow.kafka.codes import LEADERLESS
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.config_sync import ConfigOwners
from mirrorflow.kafka.grant_sync import GrantOwner, GrantResult
from mirrorflow.kafka.shared import sharing_admins
from mirrorflow.kafka.topics import ShapeResult, sync_topic_shapes
from mirrorflow.topology.model import TopicSelector
from mirrorflow.topology.windows import window_closes, window_open
from mirrorflow.work import PartitionWork, cap

log = logging.getLogger(__name__)

#: Links planned side by side at the most.
PLAN_THREADS = 8


@dataclass
class LinkPlan:
    link: LinkJob
    report: LinkReport
    tasks: list[PartitionTask] = field(default_factory=list)
    works: list[PartitionWork] = field(default_factory=list)
    errors: list[PartitionError] = field(default_factory=list)


def config_owners(spec: JobSpec, closed: Mapping[str, ClusterUnreachable] | None = None,
                  timeout: float = 30.0) -> ConfigOwners | None:
    """The owners of the spec's topic configs (``spec.topic_configs``), one plan's worth; ``None``: no owner.

    ``closed``: clusters found down or refusing this client, whose configs are not read in this run.
    """
    ownership = spec.config_ownership()
    if ownership is None:
        return None
    closed = closed or {}
    return ConfigOwners(ownership, {c: spec.client(c) for c in ownership.clusters() if c in spec.clusters}, timeout,
                        unread={c: str(e) for c, e in closed.items() if c in ownership.clusters()})


def grant_owner(spec: JobSpec, closed: Mapping[str, ClusterUnreachable] | None = None,
                timeout: float = 30.0) -> GrantOwner | None:
    """The owner of the travelling topic ACLs and the read-only guard (``spec.acl_sync``), one plan's worth;
    ``None``: ACLs stay as they are."""
    rules = spec.grant_rules()
    if rules is None:
        return None
    down = (closed or {}).get(rules.owner)
    return GrantOwner(rules, {c: spec.client(c) for c in spec.clusters}, timeout,
                      unread=str(down) if down is not None else None)


def plan_link(spec: JobSpec, link: LinkJob, selector: TopicSelector, slots: int | Callable[[], int],
              timeout: float = 30.0, retention: dict[str, tuple[float, str | None]] | None = None,
              shaped: tuple[ShapeResult, float] | None = None) -> LinkPlan:
    """Shape the target, read checkpoints and end offsets, and cut the link's work into tasks.

    ``retention``: each target's ``offsets.retention.minutes`` read so far in this run, shared by its links;
    ``shaped``: the target's shaping and its seconds, when :func:`plan` did it already.
    """
    report = LinkReport(link.link_id, link.source, link.target)
    plan = LinkPlan(link, report)
    if not link.exactly_once:
        log.warning("%s: copies AT LEAST ONCE (replication exactly_once: false): a copy that fails or is killed "
                    "duplicates up to %d messages per partition on %s", link.link_id,
                    link.txn_records or DEFAULT_TXN_RECORDS, link.target)
    source, target = spec.client(link.source), spec.client(link.target)
    clock = [time.monotonic()]

    def step(name: str) -> None:
        now = time.monotonic()
        report.plan_steps[name] = round(now - clock[0], 3)
        clock[0] = now

    if shaped is None:
        shape = sync_topic_shapes(source, target, selector, align_configs=spec.align_configs, timeout=timeout,
                                  owners=config_owners(spec, timeout=timeout))
    else:
        shape, clock[0] = shaped[0], clock[0] - shaped[1]
    report.created_topics = sorted(c.topic for c in shape.created)
    report.configs_aligned = {a.topic: sorted({*a.set, *a.delete}) for a in shape.aligned}
    report.config_problems = [*(str(e) for _, e in sorted(shape.align_failed.items())),
                              *(k.explain(v.topic, v.owner, v.target) for v in shape.plan.verdicts
                                for k in v.keys if k.action == "report")]
    report.declined += [d.to_dict() for d in shape.plan.declined]
    report.partitions_added = {a.topic: a.wanted for a in shape.partitions_added}
    report.deleted_on_source = sorted(shape.plan.deleted_on_source)
    if report.deleted_on_source:
        _deleted_on_source(spec, link, target, report.deleted_on_source, timeout)
    for topic, error in shape.blocked.items():
        plan.errors.append(PartitionError(link.link_id, link.source, link.target, topic, None, None, str(error)))

    step("target_shapes")
    topics = {t: n for t, n in list_topics(source, timeout).items()
              if selector.selects(t) and t not in shape.blocked}
    step("source_topics")
    tps = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    report.partitions = len(tps)
    report.topics = sorted(topics)
    if not tps:
        return plan
    checkpoints = attempt_checkpoints(target, link.link_id, tps, timeout)
    step("checkpoints")
    moved = {new for _, meta in checkpoints.values() if (new := switched_to(meta)) is not None}
    if moved:
        raise MirrorflowError(f"link {link.link_id} was switched from {link.target} to {', '.join(sorted(moved))}; "
                              f"this run still aims at {link.target} (stale effective target): nothing copied")
    renamed = {new for _, meta in checkpoints.values() if (new := carried_to(meta)) is not None}
    if renamed:
        raise MirrorflowError(f"the checkpoints of link {link.link_id} on {link.target} were carried to "
                              f"{', '.join(sorted(renamed))} (the levels were renumbered); this run uses the old "
                              f"topology: nothing copied")
    lows, ends, leaderless = earliest_and_stable_or_leaderless(source, tps, timeout)
    for key, error in sorted(leaderless.items()):  # stopped alone, as a target partition without a leader is
        plan.errors.append(_leaderless_source(link, key, error))
    tps = [tp for tp in tps if (tp.topic, tp.partition) not in leaderless]
    step("source_offsets")
    ids = {"source": topic_ids(source, list(topics), timeout), "target": topic_ids(target, list(topics), timeout)}
    step("topic_ids")
    retention = {} if retention is None else retention
    if link.target not in retention:
        retention[link.target] = offsets_retention_s(target, timeout)
    retention_s, unread = retention[link.target]
    if unread is not None:
        log.warning("%s: offsets.retention.minutes of %s could not be read (%s); idle checkpoints are committed "
                    "again as if it were Kafka's default of %.0f minutes", link.link_id, link.target, unread,
                    retention_s / 60)
    refresh_after = retention_s * KEEP_ALIVE_FRACTION
    now = time.time()
    keep_alive: set[tuple[str, int]] = set()
    starts: dict[tuple[str, int], int] = {}  # recovered resume points of lost checkpoints
    held: dict[tuple[str, int], tuple[tuple[str, int], ...]] = {}  # after a recreated source (copy.held)
    step("offsets_retention")
    heals = _heals(spec, link, checkpoints, lows, ids)
    if heals:
        step("archive_coverage")
    restores: dict[tuple[str, int], dict[str, Any]] = {}

    for tp in tps:
        key = (tp.topic, tp.partition)
        committed, metadata = checkpoints.get(key, (None, ""))
        low, end = lows[key], ends[key]
        reason = set_aside(metadata, ids["source"].get(tp.topic), ids["target"].get(tp.topic))
        if reason is not None:
            floors = None
            if source_recreated(metadata, ids["source"].get(tp.topic)):
                try:
                    floors = _held(link, target, tp, timeout)
                except (KafkaException, KafkaOperationError) as exc:
                    plan.errors.append(_unplannable(link, tp, "what it holds of a recreated source", exc))
                    continue
                held[key] = tuple(sorted(floors.items()))
            audit_warning("checkpoint_set_aside", run_id=spec.run_id, link=link_fields(link), topic=tp.topic,
                          partition=tp.partition, checkpoint=committed, metadata=metadata, reason=reason,
                          held_on_target=floors)
            committed = None
        if committed is not None and reason is None and end < committed:
            plan.errors.append(_truncated(spec, link, tp, committed, end))
            continue
        recovered = None
        if committed is None and reason is None and end > low:
            try:
                lost = _lost_checkpoint(spec, link, source, target, tp, end, timeout)
            except (KafkaException, KafkaOperationError) as exc:
                plan.errors.append(_unplannable(link, tp, "whether it already holds copies of the partition", exc))
                continue
            if isinstance(lost, PartitionError):
                plan.errors.append(lost)
                continue
            recovered = lost
            if recovered is not None:
                starts[key] = recovered
        begin = copy_start(committed, low, start_offset=EARLIEST if reason else recovered, on_gap=link.on_gap,
                           source=link.source)
        heal = heals.get(key) if begin.lost else None
        if heal is not None:
            if not heal.ok:
                plan.errors.append(_unhealed(spec, link, heal))
                continue
            assert spec.archive is not None  # heal_plans: no location, nothing ok
            restores[key] = heal.restore(spec.archive)
            log.warning("%s %s[%d]: %s", link.link_id, tp.topic, tp.partition, heal.why)
        # A gap is planned from the link's position, so that its copy runs even when the source holds
        # nothing past the gap: it fails the partition by name (``fail``) or records the loss (``skip``).
        start = begin.position if begin.lost and begin.position is not None else begin.offset
        work = cap(PartitionWork(link.link_id, tp.topic, tp.partition, start, end,
                                 must_run=reason is not None or recovered is not None),
                   max_records=link.max_records_per_run)
        if (work.records == 0 and not work.must_run and committed is not None and reason is None
                and committed >= low and needs_keep_alive(metadata, now, refresh_after)):
            # idle, and old enough that Kafka would soon delete it: commit it again, fenced like a copy
            work = replace(work, must_run=True)
            keep_alive.add(key)
        if work.records > 0 or work.must_run:
            plan.works.append(work)
    if keep_alive:
        log.info("%s: %d idle checkpoint(s) on %s are committed again so that they do not expire "
                 "(offsets.retention.minutes %.0f)", link.link_id, len(keep_alive), link.target, retention_s / 60)
    report.planned_records = sum(w.records for w in plan.works)

    # The cap is shared by what copies at once: transaction groups, each copied by one thread
    # (mirrorflow.copy.engine.group), so every task of a group carries the group's share.
    if callable(slots):  # asked only here, at the end: the Spark session may still be opening (copy.job)
        slots = slots()
    concurrent = max(1, min(slots * spec.copy_threads, len({txn_unit(w) for w in plan.works})))
    stop_at = _window_end(link)
    rate_share = link.max_bytes_per_second / concurrent if link.max_bytes_per_second else None
    limits = shape.plan.limits  # per topic: the target's and the source's max.message.bytes
    for work in plan.works:
        plan.tasks.append(PartitionTask(
            link_id=link.link_id, level=link.level, source=link.source, target=link.target,
            topic=work.topic, partition=work.partition, end_offset=work.end, planned_records=work.records,
            max_records=link.max_records_per_run,
            txn_records=link.txn_records or DEFAULT_TXN_RECORDS,
            max_bytes=link.max_bytes_per_run,
            stop_at=stop_at,
            max_bytes_per_second=rate_share,
            exactly_once=link.exactly_once,
            on_gap=link.on_gap,
            on_malformed=spec.on_malformed,
            max_message_bytes=limits.get(work.topic, (None, None))[0],
            source_max_message_bytes=limits.get(work.topic, (None, None))[1],
            source_topic_id=ids["source"].get(work.topic),
            target_topic_id=ids["target"].get(work.topic),
            keep_alive=(work.topic, work.partition) in keep_alive,
            start_offset=starts.get((work.topic, work.partition)),
            held=held.get((work.topic, work.partition)),
            restore=restores.get((work.topic, work.partition)),
        ))
    return plan


def _window_end(link: LinkJob) -> float | None:
    """When the link's copy must stop taking records (epoch seconds): its window's end, or now if it is
    already closed (it closed between the run's start and this plan); ``None`` without windows."""
    if not link.windows:
        return None
    windows, now = link.parsed_windows(), datetime.now(UTC)
    closes = window_closes(windows, now)
    if closes is not None:
        return closes.timestamp()
    return None if window_open(windows, now) else now.timestamp()


def _heals(spec: JobSpec, link: LinkJob, checkpoints: Mapping[tuple[str, int], tuple[int | None, str]],
           lows: Mapping[tuple[str, int], int], ids: Mapping[str, Mapping[str, str | None]]
           ) -> dict[tuple[str, int], Heal]:
    """For ``on_gap: restore``: what the archive restores of each partition's retention gap (mirrorflow.copy.heal)."""
    if link.on_gap != "restore":
        return {}
    gaps = {key: (committed, lows[key]) for key, (committed, metadata) in checkpoints.items()
            if committed is not None and key in lows and committed < lows[key]
            and set_aside(metadata, ids["source"].get(key[0]), ids["target"].get(key[0])) is None}
    try:
        return heal_plans(spec.archive, spec.archived, link.source, gaps)
    except Exception as exc:  # the archive unreachable or unreadable: those partitions stop, by name
        why = f"the archive cannot be read: {type(exc).__name__}: {exc}"
        log.error("%s: %s", link.link_id, why)
        return {key: unavailable(link.source, key[0], key[1], pos, low, why) for key, (pos, low) in gaps.items()}


def _unhealed(spec: JobSpec, link: LinkJob, heal: Heal) -> PartitionError:
    """A gap the archive does not hold whole: nothing restored, the partition stops naming what is missing."""
    audit_warning("gap", run_id=spec.run_id, link=link_fields(link), topic=heal.topic, partition=heal.partition,
                  lost_offsets=[heal.position, heal.earliest - 1], lost=heal.earliest - heal.position,
                  on_gap=link.on_gap, action="stopped: the archive does not hold the whole gap; nothing restored",
                  missing=[[a, b - 1] for a, b in heal.missing], archived=[[a, b - 1] for a, b in heal.covered],
                  unavailable=heal.unavailable)
    log.error("%s %s[%d]: %s", link.link_id, heal.topic, heal.partition, heal.why)
    return PartitionError(link.link_id, link.source, link.target, heal.topic, heal.partition, heal.position, heal.why)


def _held(link: LinkJob, target: ClusterClient, tp: TopicPartition, timeout: float) -> dict[str, int]:
    """After the link's source topic was recreated: what its target holds already of what it passes on."""
    floors, earliest = held_on_target(target, link.source, link.level, tp.topic, tp.partition, timeout)
    log.warning("%s %s[%d]: the source topic was recreated; what the link passes on again is skipped where %s "
                "holds it already (highest origin offset held, per origin: %s)", link.link_id, tp.topic,
                tp.partition, link.target, floors or "none")
    if earliest > 0:
        log.warning("%s %s[%d]: %s no longer holds offsets below %d (retention): copies it held there and whose "
                    "origin has no later copy on it cannot be told from new ones and are passed on again",
                    link.link_id, tp.topic, tp.partition, link.target, earliest)
    return floors


def _unplannable(link: LinkJob, tp: TopicPartition, asked: str, exc: Exception) -> PartitionError:
    """A partition the plan must read first and cannot: it stops alone, the link's others copy on.

    A mirrorflow error names its cluster. A bare client error is the target's: the
    source's offsets of every partition were read just before, and a target
    partition without a leader is the usual reason.
    """
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    leaderless = isinstance(error, KafkaError) and error.code() in LEADERLESS
    cluster = exc.cluster if isinstance(exc, KafkaOperationError) else link.target
    why = "it has no leader (its broker is down?)" if leaderless else f"{type(exc).__name__}: {exc}"
    text = (f"{cluster} {tp.topic}[{tp.partition}] could not be read to learn {asked}: {why}; not copied in "
            f"this run, nothing written; the link's other partitions copy on")
    log.error("%s %s[%d]: %s", link.link_id, tp.topic, tp.partition, text)
    return PartitionError(link.link_id, link.source, link.target, tp.topic, tp.partition, None, text)


def _leaderless_source(link: LinkJob, key: tuple[str, int], error: KafkaError) -> PartitionError:
    """A source partition without a leader: its offsets cannot be read, so it stops alone; the link copies on."""
    topic, partition = key
    text = (f"{link.source} {topic}[{partition}] has no leader (its broker is down?): its offsets could not be "
            f"read ({error.name()}); not copied in this run, nothing written; the link's other partitions copy on")
    log.error("%s %s[%d]: %s", link.link_id, topic, partition, text)
    return PartitionError(link.link_id, link.source, link.target, topic, partition, None, text)


def _truncated(spec: JobSpec, link: LinkJob, tp: TopicPartition, committed: int, end: int) -> PartitionError:
    """A source partition that ends below the link's checkpoint: it lost offsets the link copied."""
    audit_warning("truncated", run_id=spec.run_id, link=link_fields(link), topic=tp.topic, partition=tp.partition,
                  checkpoint=committed, source_end=end, diverged_at=end)
    return PartitionError(link.link_id, link.source, link.target, tp.topic, tp.partition, committed,
                          shorter(link.link_id, link.source, tp.topic, tp.partition, committed, end))


def _lost_checkpoint(spec: JobSpec, link: LinkJob, source: ClusterClient, target: ClusterClient,
                     tp: TopicPartition, end: int, timeout: float) -> PartitionError | int | None:
    """A link without a checkpoint whose target already holds copies of its source's partition.

    Kafka deletes a group's committed offsets some time after their last commit
    (``offsets.retention.minutes``), and a link whose id changed starts without
    one: copying from the source's first offset would copy again everything the
    target holds. The provenance of the target's copies says whether that is so,
    and often where the link stopped (:mod:`mirrorflow.copy.state.recovery`). Returns
    ``None`` (no copies: a new link), the proven resume point, or the refusal.
    """
    found = find_copies(target, link.source, tp.topic, tp.partition, timeout)
    if found.highest is None:
        return None
    committed, _ = read_checkpoints(target, link.link_id, [tp], timeout).get((tp.topic, tp.partition), (None, ""))
    if committed is not None:  # another attempt of the link committed meanwhile: its copy starts from there
        return None
    renamed = _former_links(link, target, tp, timeout)
    recovery = None
    if not renamed and not link.switched:
        recovery = recover_position(source, target, link.level, tp.topic, tp.partition, found.highest, end, timeout)
        if recovery.position is not None:
            audit_warning("checkpoint_recovered", run_id=spec.run_id, link=link_fields(link), topic=tp.topic,
                          partition=tp.partition, position=recovery.position, how=recovery.why)
            log.warning("%s %s[%d]: the checkpoint on %s was lost; resuming at %d, proven from provenance: %s",
                        link.link_id, tp.topic, tp.partition, link.target, recovery.position, recovery.why)
            return recovery.position
    if renamed:
        cause = (f"{link.target} holds checkpoints of {', '.join(renamed)} for it: the levels were renumbered. "
                 f"Carry the checkpoints over with mirror_carry_checkpoints (level_map old:new, dry run first; "
                 f"docs/levels.md, \"Renumbering levels\")")
    else:
        unproven = recovery.why if recovery is not None else (
            f"the link's target is not its default one ({link.target}), so it may hold this source's messages "
            f"through other links too")
        cause = (f"the checkpoint was lost (committed offsets expired, or the link's id changed), and where the "
                 f"link stopped is not proven: {unproven}. Resume with "
                 f"mirror_resolve_gap (action resume_from, offset {found.highest + 1}) once the target is known to "
                 f"hold everything before it")
    error = (f"the link has no checkpoint on {link.target}, but {link.target} already holds {found.count} copies of "
             f"{link.source}'s messages of this partition (up to source offset {found.highest}); nothing copied, so "
             f"that nothing is copied twice: {cause}")
    audit_warning("checkpoint_missing", run_id=spec.run_id, link=link_fields(link), topic=tp.topic,
                  partition=tp.partition, copies_on_target=found.count, highest_origin_offset=found.highest,
                  former_links=renamed, unproven=None if renamed else (recovery.why if recovery else "switched"))
    return PartitionError(link.link_id, link.source, link.target, tp.topic, tp.partition, None, error)


def _deleted_on_source(spec: JobSpec, link: LinkJob, target: ClusterClient, topics: list[str],
                       timeout: float) -> None:
    """Say, per topic the source lost while the target keeps it, how far this link had copied it.

    What the source held past those positions when the topic was deleted is gone with
    it, and no reader can tell now whether there was any: the completeness audit,
    which counted the source's records as they came, names the ones never copied
    (docs/topics.md, "Deleted topics"). A topic the link never copied is only logged.
    """
    sizes = list_topics(target, timeout)
    tps = [TopicPartition(t, p) for t in topics for p in range(sizes.get(t, 0))]
    checkpoints = read_checkpoints(target, link.link_id, tps, timeout) if tps else {}
    for topic in topics:
        copied = {p: off for (t, p), (off, _) in sorted(checkpoints.items()) if t == topic and off is not None}
        log.warning("%s: topic %s is gone from %s but still on %s; it is left there (delete it by hand if "
                    "that is wanted)", link.link_id, topic, link.source, link.target)
        if copied:
            audit_warning("topic_deleted_on_source", run_id=spec.run_id, link=link_fields(link), topic=topic,
                          copied_up_to=copied,
                          unknown="what the source held past these offsets when it deleted the topic")


def _former_links(link: LinkJob, target: ClusterClient, tp: TopicPartition, timeout: float) -> list[str]:
    """Other link ids of the same source with a checkpoint for ``tp`` on this target: the levels were renumbered."""
    prefix = checkpoint_group(f"{link.source}.L")
    out = []
    for group in group_ids(target, prefix, timeout):
        other = group[len(checkpoint_group("")):]
        if other == link.link_id or not other[len(link.source) + 2:].isdigit():
            continue
        committed, _ = read_checkpoints(target, other, [tp], timeout).get((tp.topic, tp.partition), (None, ""))
        if committed is not None:
            out.append(other)
    return out


def _closed_clusters(spec: JobSpec) -> dict[str, ClusterUnreachable]:
    """The clusters of the spec's links that do not let this client in: down, or refusing its login.

    Probed once each before planning, so that a wrong password or a cluster that is
    down fails the links that need it at once, saying which and why, instead of
    timing out somewhere inside planning (once per request); the other links are planned.
    One after another: probing side by side once crashed a test process (SIGABRT
    inside librdkafka, on CI, not reproduced), and a probe of a cluster that answers is quick.
    """
    closed: dict[str, ClusterUnreachable] = {}
    ownership, grants = spec.config_ownership(), spec.grant_rules()
    owners = {*(ownership.clusters() if ownership is not None else ()), *((grants.owner,) if grants and grants.sync
                                                                          else ())}
    for name in sorted({c for link in spec.links for c in (link.source, link.target)}
                       | {c for c in owners if c in spec.clusters}):
        try:
            probe(ClusterClient(name, spec.clusters[name]), timeout=10.0)
        except ClusterUnreachable as exc:  # ClusterLoginFailed included
            closed[name] = exc
            log.error("%s", exc)
    return closed


def plan(spec: JobSpec, slots: int | Callable[[], int]) -> list[LinkPlan]:
    """Plan every link of the spec; a link whose clusters fail is reported, the others still planned.

    Planning is admin round trips, not work. Targets are shaped first, one link
    after another in the spec's order (a link's target is another link's source,
    whose partitions it reads); the rest, reads only, runs for every link side by
    side. The plans come back in the spec's order of links. Every question goes
    through one admin client per cluster (:mod:`mirrorflow.kafka.shared`).
    """
    with sharing_admins():
        return _plan(spec, slots)


def _plan(spec: JobSpec, slots: int | Callable[[], int]) -> list[LinkPlan]:
    selector = TopicSelector(spec.topics)
    retention: dict[str, tuple[float, str | None]] = {}  # read once per target cluster
    closed = _closed_clusters(spec)
    owners = config_owners(spec, closed)
    grants = grant_owner(spec, closed)
    granted: dict[str, GrantResult] = {}

    def failed(link: LinkJob, exc: MirrorflowError) -> LinkPlan:
        report = LinkReport(link.link_id, link.source, link.target, error=str(exc))
        log.error("%s: planning failed: %s", link.link_id, exc)
        return LinkPlan(link, report, errors=[
            PartitionError(link.link_id, link.source, link.target, "*", None, None, f"planning failed: {exc}")])

    shaped: list[tuple[ShapeResult, float] | LinkPlan] = []
    for link in spec.links:
        started = time.monotonic()
        try:
            for name in (link.source, link.target):
                if name in closed:
                    raise closed[name]
            shape = sync_topic_shapes(spec.client(link.source), spec.client(link.target), selector,
                                      align_configs=spec.align_configs, owners=owners)
            if grants is not None and link.target not in granted:
                granted[link.target] = grants.sync(spec.client(link.target))
            shaped.append((shape, time.monotonic() - started))
        except MirrorflowError as exc:
            shaped.append(failed(link, exc))

    def plan_one(item: tuple[LinkJob, tuple[ShapeResult, float] | LinkPlan]) -> LinkPlan:
        link, shape = item
        if isinstance(shape, LinkPlan):
            return shape
        try:
            return plan_link(spec, link, selector, slots, retention=retention, shaped=shape)
        except MirrorflowError as exc:
            return failed(link, exc)

    with ThreadPoolExecutor(max_workers=max(1, min(PLAN_THREADS, len(spec.links))), thread_name_prefix="plan") as pool:
        plans = list(pool.map(plan_one, zip(spec.links, shaped, strict=True)))
    for one in plans:  # each target's ACL sync, told on the first of its links
        result = granted.pop(one.link.target, None)
        if result is not None:
            one.report.acls_created = [str(g) for g in result.created]
            one.report.acls_deleted = [str(g) for g in result.deleted]
            one.report.acl_problems = list(result.problems)
            one.report.declined += [d.to_dict() for d in result.declined]
    return plans
