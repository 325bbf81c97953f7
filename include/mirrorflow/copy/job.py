"""One micro-batch of one level: the driver plans, Spark executors copy.

uReplicator's controller/worker split without a consumer group: the driver (the
Spark job's main process, or any Python process for tests and dry runs) does
every admin call, per link:

1. keep the target's topics in the source's shape (create missing topics, add
   partitions the source gained; conflicts and failures block only their topic);
2. list the source's selected topic-partitions, read the link's checkpoints on
   the target (one request), and capture each partition's last stable offset
   (one request): that is the run's planned end, so a run is a bounded batch;
3. cap each range by the per-run limits and pack the ranges into Spark tasks of
   similar size (:mod:`mirrorflow.work`).

Executors run :func:`mirrorflow.copy.partition.copy_partition` for each range;
it fences, re-reads the checkpoint and copies exactly once. One partition's
failure is reported in its result and never stops the others. The driver then
logs one audit line per partition and returns a :class:`JobResult`.

The job is described by a :class:`JobSpec`, plain JSON, so the same job runs
from Airflow (through ``spark-submit``), by hand, and in-process in tests. The
spec carries each cluster's resolved client settings, which may hold secrets:
it travels in the ``MIRRORFLOW_JOB`` environment variable of ``spark-submit``
and in memory, never in a file, and its ``repr`` hides them.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from confluent_kafka import TopicPartition

from mirrorflow.audit import audit, audit_warning
from mirrorflow.copy.checkpoints import (
    EARLIEST,
    checkpoint_group,
    copy_start,
    needs_keep_alive,
    read_checkpoints,
    set_aside,
    source_recreated,
    switched_to,
)
from mirrorflow.copy.copies import find_copies
from mirrorflow.copy.executor import copy_bins, copy_tasks
from mirrorflow.copy.heal import Heal, heal_plans, unavailable
from mirrorflow.copy.held import held_on_target
from mirrorflow.copy.history import shorter
from mirrorflow.copy.recovery import recover_position
from mirrorflow.copy.task import OnGap, PartitionTask
from mirrorflow.copy.txn_group import txn_unit
from mirrorflow.defaults import DEFAULT_COPY_THREADS, DEFAULT_ON_GAP, DEFAULT_TXN_RECORDS, KEEP_ALIVE_FRACTION
from mirrorflow.errors import ClusterUnreachable, MirrorflowError
from mirrorflow.kafka.admin import (
    earliest_and_stable,
    group_ids,
    list_topics,
    offsets_retention_s,
    probe,
    topic_ids,
)
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.topics import sync_topic_shapes
from mirrorflow.progress import Progress, tracking
from mirrorflow.spark_run import parallelism, run_bins
from mirrorflow.topology.model import TopicSelector
from mirrorflow.work import PartitionWork, cap, pack

log = logging.getLogger(__name__)


#: Environment variable that carries the job spec into ``spark-submit``.
JOB_ENV = "MIRRORFLOW_JOB"


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class LinkJob:
    """One link to copy in this run, with its effective target and settings."""

    link_id: str
    level: int
    source: str
    target: str
    max_bytes_per_second: int | None = None
    max_records_per_run: int | None = None
    max_bytes_per_run: int | None = None
    txn_records: int | None = None
    #: ``False``: at-least-once copies (``replication`` key ``exactly_once: false``).
    exactly_once: bool = True
    #: What a copy does when the source lost offsets the link has not copied (``replication`` key ``on_gap``).
    on_gap: OnGap = DEFAULT_ON_GAP
    #: The target is not the link's default one (a switch or an onboarding pin): its copies of the
    #: source's messages may have come through other links too (mirrorflow.copy.recovery).
    switched: bool = False


@dataclass(frozen=True)
class JobSpec:
    level: int
    run_id: str
    #: The topology's topic patterns (full match; internal topics never selected).
    topics: tuple[str, ...]
    links: tuple[LinkJob, ...]
    #: Cluster name -> librdkafka settings (``bootstrap.servers`` and any credentials).
    clusters: Mapping[str, Mapping[str, Any]] = field(repr=False)
    #: Spark tasks to pack the work into; ``None``: Spark's default parallelism.
    slots: int | None = None
    #: Whether the target's travelling topic configs are realigned to the source's.
    align_configs: bool = False
    #: Partitions each Spark task copies at the same time (``replication.copy_threads``).
    copy_threads: int = DEFAULT_COPY_THREADS
    #: The S3 archive (``ArchiveLocation.to_dict()``, credentials included: hidden), for links with
    #: ``on_gap: restore``; ``None``: no link heals from it in this run.
    archive: Mapping[str, Any] | None = field(default=None, repr=False)
    #: The archived clusters (topology key ``archive.clusters``).
    archived: tuple[str, ...] = ()

    def __repr__(self) -> str:
        links = ", ".join(f"{l.link_id}->{l.target}" for l in self.links)
        return (f"JobSpec(level={self.level}, run_id={self.run_id!r}, links=[{links}], "
                f"clusters=<{len(self.clusters)} hidden>)")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise TypeError(f"expected a JSON object, got {type(data).__name__}")
            topics, clusters, slots = data["topics"], data["clusters"], data.get("slots")
            if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
                raise TypeError("topics must be a list of strings")
            if not isinstance(clusters, dict) or not all(isinstance(v, dict) for v in clusters.values()):
                raise TypeError("clusters must map cluster names to client settings")
            if slots is not None and (not isinstance(slots, int) or isinstance(slots, bool) or slots < 1):
                raise TypeError("slots must be a positive integer or null")
            threads = data.get("copy_threads", DEFAULT_COPY_THREADS)
            if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
                raise TypeError("copy_threads must be a positive integer")
            return cls(
                level=int(data["level"]),
                run_id=str(data["run_id"]),
                topics=tuple(topics),
                links=tuple(LinkJob(**link) for link in data["links"]),
                clusters={k: dict(v) for k, v in clusters.items()},
                slots=slots,
                align_configs=bool(data.get("align_configs", False)),
                copy_threads=threads,
                archive=_archive(data.get("archive")),
                archived=tuple(str(c) for c in data.get("archived") or ()),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problem = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise MirrorflowError(f"{JOB_ENV}: not a valid mirrorflow job spec: {problem}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JobSpec:
        text = (environ if environ is not None else os.environ).get(JOB_ENV)
        if not text:
            raise MirrorflowError(f"{JOB_ENV} is not set: the level DAG passes the job spec in this variable "
                                  "(see spark_jobs/README.md to run the job by hand)")
        return cls.from_json(text)

    def client(self, cluster: str) -> ClusterClient:
        try:
            return ClusterClient(cluster, dict(self.clusters[cluster]))
        except KeyError:
            raise MirrorflowError(f"job spec has no client settings for cluster {cluster!r}") from None


def _archive(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise TypeError("archive must be an archive location object or null")
    return value


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PartitionError:
    link: str
    source: str
    target: str
    topic: str
    partition: int | None
    offset: int | None
    error: str

    def __str__(self) -> str:
        where = self.topic if self.partition is None else f"{self.topic}[{self.partition}]"
        at = "" if self.offset is None else f" at source offset {self.offset}"
        return f"{self.link} ({self.source} -> {self.target}) {where}{at}: {self.error}"


@dataclass
class LinkReport:
    link: str
    source: str
    target: str
    partitions: int = 0
    planned_records: int = 0
    copied: int = 0
    skipped: int = 0
    bytes: int = 0
    created_topics: list[str] = field(default_factory=list)
    partitions_added: dict[str, int] = field(default_factory=dict)
    deleted_on_source: list[str] = field(default_factory=list)
    error: str | None = None
    #: Seconds of each planning step (target shapes, source topics, checkpoints, offsets, topic ids): a slow
    #: plan says where it waited (rare slow plans were seen in benchmarks; docs/benchmarks.md).
    plan_steps: dict[str, float] = field(default_factory=dict)


@dataclass
class JobResult:
    level: int
    run_id: str
    links: list[LinkReport] = field(default_factory=list)
    partitions: list[dict[str, Any]] = field(default_factory=list)
    errors: list[PartitionError] = field(default_factory=list)
    plan_s: float = 0.0
    copy_s: float = 0.0
    tasks: int = 0
    #: Wall clock (epoch seconds) when every partition's copy had ended, its last commit
    #: on the target included: where the benchmarks' clock stops (Spark's stop comes after).
    finished_at: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def copied(self) -> int:
        return sum(link.copied for link in self.links)

    def summary(self) -> dict[str, Any]:
        """What the DAG run returns: totals, per link, and every error named in full."""
        return {
            "level": self.level,
            "run_id": self.run_id,
            "ok": self.ok,
            "links": [asdict(link) for link in self.links],
            "copied": self.copied,
            "skipped": sum(link.skipped for link in self.links),
            "bytes": sum(link.bytes for link in self.links),
            "partitions_copied": sum(1 for p in self.partitions if p["copied"] or p["skipped"]),
            "spark_tasks": self.tasks,
            "plan_s": round(self.plan_s, 3),
            "copy_s": round(self.copy_s, 3),
            "errors": [str(e) for e in self.errors],
            "error_details": [asdict(e) for e in self.errors],
        }

    def to_json(self) -> str:
        data = self.summary()
        data["partitions"] = self.partitions
        data["finished_at"] = self.finished_at
        return json.dumps(data, sort_keys=True, default=str)


# --------------------------------------------------------------------------- planning (driver)


@dataclass
class LinkPlan:
    link: LinkJob
    report: LinkReport
    tasks: list[PartitionTask] = field(default_factory=list)
    works: list[PartitionWork] = field(default_factory=list)
    errors: list[PartitionError] = field(default_factory=list)


def plan_link(spec: JobSpec, link: LinkJob, selector: TopicSelector, slots: int,
              timeout: float = 30.0, retention: dict[str, tuple[float, str | None]] | None = None) -> LinkPlan:
    """Shape the target, read checkpoints and end offsets, and cut the link's work into tasks.

    ``retention``: each target's ``offsets.retention.minutes`` read so far in this run, shared by its links.
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

    shape = sync_topic_shapes(source, target, selector, align_configs=spec.align_configs, timeout=timeout)
    report.created_topics = sorted(c.topic for c in shape.created)
    report.partitions_added = {a.topic: a.wanted for a in shape.partitions_added}
    report.deleted_on_source = sorted(shape.plan.deleted_on_source)
    for topic in report.deleted_on_source:
        log.warning("%s: topic %s is gone from %s but still on %s; it is left there (delete it by hand if "
                    "that is wanted)", link.link_id, topic, link.source, link.target)
    for topic, error in shape.blocked.items():
        plan.errors.append(PartitionError(link.link_id, link.source, link.target, topic, None, None, str(error)))

    step("target_shapes")
    topics = {t: n for t, n in list_topics(source, timeout).items()
              if selector.selects(t) and t not in shape.blocked}
    step("source_topics")
    tps = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    report.partitions = len(tps)
    if not tps:
        return plan
    checkpoints = read_checkpoints(target, link.link_id, tps, timeout)
    step("checkpoints")
    moved = {new for _, meta in checkpoints.values() if (new := switched_to(meta)) is not None}
    if moved:
        raise MirrorflowError(f"link {link.link_id} was switched from {link.target} to {', '.join(sorted(moved))}; "
                              f"this run still aims at {link.target} (stale effective target): nothing copied")
    lows, ends = earliest_and_stable(source, tps, timeout)
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
                floors = _held(link, target, tp, timeout)
                held[key] = tuple(sorted(floors.items()))
            audit_warning("checkpoint_set_aside", run_id=spec.run_id, link=_link_fields(link), topic=tp.topic,
                          partition=tp.partition, checkpoint=committed, metadata=metadata, reason=reason,
                          held_on_target=floors)
            committed = None
        if committed is not None and reason is None and end < committed:
            plan.errors.append(_truncated(spec, link, tp, committed, end))
            continue
        recovered = None
        if committed is None and reason is None and end > low:
            lost = _lost_checkpoint(spec, link, source, target, tp, end, timeout)
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
    # (mirrorflow.copy.group), so every task of a group carries the group's share.
    concurrent = max(1, min(slots * spec.copy_threads, len({txn_unit(w) for w in plan.works})))
    rate_share = link.max_bytes_per_second / concurrent if link.max_bytes_per_second else None
    for work in plan.works:
        plan.tasks.append(PartitionTask(
            link_id=link.link_id, level=link.level, source=link.source, target=link.target,
            topic=work.topic, partition=work.partition, end_offset=work.end, planned_records=work.records,
            max_records=link.max_records_per_run,
            txn_records=link.txn_records or DEFAULT_TXN_RECORDS,
            max_bytes=link.max_bytes_per_run,
            max_bytes_per_second=rate_share,
            exactly_once=link.exactly_once,
            on_gap=link.on_gap,
            source_topic_id=ids["source"].get(work.topic),
            target_topic_id=ids["target"].get(work.topic),
            keep_alive=(work.topic, work.partition) in keep_alive,
            start_offset=starts.get((work.topic, work.partition)),
            held=held.get((work.topic, work.partition)),
            restore=restores.get((work.topic, work.partition)),
        ))
    return plan


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
    audit_warning("gap", run_id=spec.run_id, link=_link_fields(link), topic=heal.topic, partition=heal.partition,
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


def _truncated(spec: JobSpec, link: LinkJob, tp: TopicPartition, committed: int, end: int) -> PartitionError:
    """A source partition that ends below the link's checkpoint: it lost offsets the link copied."""
    audit_warning("truncated", run_id=spec.run_id, link=_link_fields(link), topic=tp.topic, partition=tp.partition,
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
    and often where the link stopped (:mod:`mirrorflow.copy.recovery`). Returns
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
            audit_warning("checkpoint_recovered", run_id=spec.run_id, link=_link_fields(link), topic=tp.topic,
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
    audit_warning("checkpoint_missing", run_id=spec.run_id, link=_link_fields(link), topic=tp.topic,
                  partition=tp.partition, copies_on_target=found.count, highest_origin_offset=found.highest,
                  former_links=renamed, unproven=None if renamed else (recovery.why if recovery else "switched"))
    return PartitionError(link.link_id, link.source, link.target, tp.topic, tp.partition, None, error)


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
    """
    closed: dict[str, ClusterUnreachable] = {}
    for name in sorted({c for link in spec.links for c in (link.source, link.target)}):
        try:
            probe(ClusterClient(name, spec.clusters[name]), timeout=10.0)
        except ClusterUnreachable as exc:  # ClusterLoginFailed included
            closed[name] = exc
            log.error("%s", exc)
    return closed


def plan(spec: JobSpec, slots: int) -> list[LinkPlan]:
    """Plan every link of the spec; a link whose clusters fail is reported, the others still planned."""
    selector = TopicSelector(spec.topics)
    plans = []
    retention: dict[str, tuple[float, str | None]] = {}  # read once per target cluster
    closed = _closed_clusters(spec)
    for link in spec.links:
        try:
            for name in (link.source, link.target):
                if name in closed:
                    raise closed[name]
            plans.append(plan_link(spec, link, selector, slots, retention=retention))
        except MirrorflowError as exc:
            report = LinkReport(link.link_id, link.source, link.target, error=str(exc))
            plans.append(LinkPlan(link, report, errors=[
                PartitionError(link.link_id, link.source, link.target, "*", None, None, f"planning failed: {exc}")]))
            log.error("%s: planning failed: %s", link.link_id, exc)
    return plans


# --------------------------------------------------------------------------- copying (executors)


def execute(spark: Any, spec: Any, bins: list[list[PartitionTask]], progress: Progress | None = None
            ) -> list[dict[str, Any]]:
    """Run the bins as Spark tasks (one bin, one task), or in this process when ``spark`` is ``None``.

    ``spec`` is any job spec with ``clusters``, ``level``, ``run_id`` and ``copy_threads``;
    ``spark`` a SparkContext or a Spark Connect session (:mod:`mirrorflow.spark_run`).
    ``progress``: in this process the copiers count every committed transaction into it
    (:func:`mirrorflow.progress.note`); on Spark it follows the finished Spark tasks.
    """
    if not bins:
        return []
    clusters = {name: dict(settings) for name, settings in spec.clusters.items()}
    threads = spec.copy_threads
    if spark is None:
        if progress is None:
            return [r for tasks in bins for r in copy_tasks(clusters, tasks, threads)]
        with tracking(progress), progress.running():
            return [r for tasks in bins for r in copy_tasks(clusters, tasks, threads)]
    return run_bins(spark, functools.partial(copy_bins, clusters, threads), bins,
                    f"mirrorflow level {spec.level} run {spec.run_id}: {sum(map(len, bins))} partitions", progress)


def passed(results: list[dict[str, Any]]) -> int:
    """Source offsets the copies passed (what a progress plan counts): from each start to where it committed."""
    return sum(max(0, r["next_offset"] - r["start_offset"]) for r in results if r["start_offset"] >= 0)


# --------------------------------------------------------------------------- the job


def run_job(spec: JobSpec, spark: Any = None) -> JobResult:
    """Plan, copy, audit. ``spark=None`` copies in this process (dry runs, small tests)."""
    result = JobResult(spec.level, spec.run_id)
    slots = spec.slots or parallelism(spark)
    started = time.monotonic()
    plans = plan(spec, slots)
    by_link = {p.link.link_id: p for p in plans}
    tasks_by_key = {(t.link_id, t.topic, t.partition): t for p in plans for t in p.tasks}
    works = [w for p in plans for w in p.works]
    packed = pack(works, slots, unit=txn_unit)
    bins = [[tasks_by_key[(w.link_id, w.topic, w.partition)] for w in bin_] for bin_ in packed]
    result.tasks = len(bins)
    result.plan_s = time.monotonic() - started
    for p in plans:
        result.links.append(p.report)
        result.errors.extend(p.errors)
        log.info("plan %s: %s -> %s, %d partitions, %d offsets to read%s (%s)", p.link.link_id, p.link.source,
                 p.link.target, p.report.partitions, p.report.planned_records,
                 f", created {p.report.created_topics}" if p.report.created_topics else "",
                 ", ".join(f"{k} {v:.2f}s" for k, v in p.report.plan_steps.items()) or "nothing to plan")
    log.info("level %d run %s: %d partition ranges in %d Spark tasks (planned in %.2fs)", spec.level,
             spec.run_id, len(works), len(bins), result.plan_s)

    started = time.monotonic()
    progress = Progress(f"level {spec.level} run {spec.run_id}", sum(t.planned_records for b in bins for t in b),
                        fields={"job": "level", "run_id": spec.run_id, "level": spec.level})
    results = execute(spark, spec, bins, progress)
    progress.finish(passed(results), sum(r["bytes"] for r in results))
    result.copy_s = time.monotonic() - started
    result.finished_at = time.time()
    for r in sorted(results, key=lambda r: (r["link_id"], r["topic"], r["partition"])):
        result.partitions.append(r)
        p = by_link[r["link_id"]]
        p.report.copied += r["copied"]
        p.report.skipped += r["skipped"]
        p.report.bytes += r["bytes"]
        _audit_partition(spec, p.link, r)
        if r["error"]:
            result.errors.append(PartitionError(r["link_id"], r["source"], r["target"], r["topic"], r["partition"],
                                                r["error_offset"], r["error"]))
    audit("copy_run", run_id=spec.run_id, level=spec.level, links=len(result.links), copied=result.copied,
          partitions=len(result.partitions), errors=[str(e) for e in result.errors], plan_s=round(result.plan_s, 3),
          copy_s=round(result.copy_s, 3))
    return result


def _audit_partition(spec: JobSpec, link: LinkJob, r: Mapping[str, Any]) -> None:
    audit(
        "copy",
        run_id=spec.run_id,
        link=_link_fields(link),
        topic=r["topic"],
        partition=r["partition"],
        source_offsets=[r["start_offset"], r["next_offset"]],
        target_offsets=[r["target_first_offset"], r["target_last_offset"]],
        copied=r["copied"],
        skipped=r["skipped"],
        malformed=r["malformed"],
        bytes=r["bytes"],
        checksum=f"crc32:{r['checksum']:08x}",
        exactly_once=link.exactly_once,
        transactions=r["transactions"],
        duration_s=r["duration_s"],
        throttled_s=r.get("throttled_s", 0.0),
        lost_to_retention=r["lost_to_retention"],
        restored=r.get("restored", 0),
        set_aside=r.get("set_aside"),
        kept_alive=r.get("kept_alive", False),
        error=r["error"],
    )
    if r.get("diverged_at") is not None:
        audit_warning("truncated", run_id=spec.run_id, link=_link_fields(link), topic=r["topic"],
                      partition=r["partition"], checkpoint=r["start_offset"], diverged_at=r["diverged_at"])
    if r.get("lost_offsets"):
        audit_warning(
            "gap",
            run_id=spec.run_id,
            link=_link_fields(link),
            topic=r["topic"],
            partition=r["partition"],
            lost_offsets=r["lost_offsets"],
            lost=r["lost_to_retention"],
            on_gap=link.on_gap,
            action=("stopped: nothing copied past the gap" if r["error"]
                    else "skipped: copied on from the source's first offset"),
        )
    if r.get("restored_offsets"):
        first, last = r["restored_offsets"]
        audit_warning("gap", run_id=spec.run_id, link=_link_fields(link), topic=r["topic"], partition=r["partition"],
                      lost_offsets=[first, last], lost=0, on_gap=link.on_gap, restored=r["restored"],
                      action=f"restored from the archive of {link.source}; copied on from Kafka"
                      + (f" (stopped: {r['error']})" if r["error"] else ""))


def _link_fields(link: LinkJob) -> dict[str, Any]:
    """How audit lines name a link."""
    return {"id": link.link_id, "source": link.source, "level": link.level, "target": link.target}
