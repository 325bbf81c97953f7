"""Where each partition's copy starts in this run, and how far it goes: the plan's per-partition decisions.

The rule is the copier's own (:func:`mirrorflow.copy.state.checkpoints.copy_start`);
here it meets what only a planner learns first: a checkpoint set aside (a topic
recreated), a source that ends below its checkpoint, a lost checkpoint
(:mod:`~mirrorflow.copy.plan.lost`), a retention gap the archive heals
(:mod:`~mirrorflow.copy.plan.heals`), an idle checkpoint to commit again before
Kafka deletes it. Each range is capped by the per-run limits (:mod:`mirrorflow.work`).
A partition that cannot be planned stops alone (:mod:`~mirrorflow.copy.plan.refusals`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from mirrorflow.copy.plan.heals import plan_heals, unhealed
from mirrorflow.copy.plan.lost import lost_checkpoint, prescan
from mirrorflow.copy.plan.reads import Key, LinkReads
from mirrorflow.copy.plan.refusals import truncated, unplannable
from mirrorflow.copy.spec import JobSpec, LinkJob, PartitionError, link_fields
from mirrorflow.copy.state.checkpoints import EARLIEST, copy_start, needs_keep_alive, set_aside, source_recreated
from mirrorflow.copy.state.held import held_on_target
from mirrorflow.defaults import KEEP_ALIVE_FRACTION
from mirrorflow.errors import KafkaOperationError
from mirrorflow.journal import journal_warning
from mirrorflow.kafka import ClusterClient
from mirrorflow.work import PartitionWork, cap

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checkpoint:
    """What the link's checkpoint says of one partition, asked once (:mod:`mirrorflow.copy.state.checkpoints`)."""

    committed: int | None
    metadata: str
    #: Why it belongs to another incarnation of the source or target topic; ``None``: it does not.
    set_aside: str | None
    #: It belongs to another incarnation of the source topic: the target may hold what the link passes on.
    source_recreated: bool
    #: Committed so long ago that Kafka would soon delete it (``offsets.retention.minutes``).
    expiring: bool


@dataclass
class Starts:
    """Each partition's planned range, and what its task carries beside it."""

    works: list[PartitionWork] = field(default_factory=list)
    #: Idle partitions whose checkpoint is committed again, so that it does not expire.
    keep_alive: set[Key] = field(default_factory=set)
    #: Recovered resume points of lost checkpoints.
    starts: dict[Key, int] = field(default_factory=dict)
    #: After a recreated source: what the target holds already, per origin (mirrorflow.copy.state.held).
    held: dict[Key, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    #: What the archive restores of a gap.
    restores: dict[Key, dict[str, Any]] = field(default_factory=dict)


def start_partitions(spec: JobSpec, link: LinkJob, read: LinkReads, errors: list[PartitionError],
                     step: Callable[[str], None], timeout: float) -> Starts:
    """Plan each partition the link read: its range, or its error in ``errors``."""
    source, target = spec.client(link.source), spec.client(link.target)
    found = _checkpoints(read, time.time(), read.retention_s * KEEP_ALIVE_FRACTION)
    heals = plan_heals(spec, link, _gaps(read, found))
    if heals:
        step("archive_coverage")
    out = Starts()
    # a link's first run (or lost checkpoints): the target's partitions read together, not one consumer each
    without = [tp for tp in read.tps if _may_hold_copies(read, (tp.topic, tp.partition), found)]
    unchecked = prescan(link, target, without, timeout)
    if without:
        step("copies_on_target")

    for tp in read.tps:
        key = (tp.topic, tp.partition)
        checkpoint = found[key]
        committed, low, end = checkpoint.committed, read.lows[key], read.ends[key]
        reason = checkpoint.set_aside
        if reason is not None:
            floors = None
            if checkpoint.source_recreated:
                try:
                    floors = _held(link, target, tp, timeout)
                except (KafkaException, KafkaOperationError) as exc:
                    errors.append(unplannable(link, tp, "what it holds of a recreated source", exc))
                    continue
                out.held[key] = tuple(sorted(floors.items()))
            journal_warning("checkpoint_set_aside", run_id=spec.run_id, link=link_fields(link), topic=tp.topic,
                            partition=tp.partition, checkpoint=committed, metadata=checkpoint.metadata, reason=reason,
                            held_on_target=floors)
            committed = None
        if committed is not None and reason is None and end < committed:
            errors.append(truncated(spec, link, tp, committed, end))
            continue
        recovered = None
        if _may_hold_copies(read, key, found):  # no checkpoint (none set aside either), records to copy
            try:
                lost = lost_checkpoint(spec, link, source, target, tp, end, timeout, unchecked.get(key))
            except (KafkaException, KafkaOperationError) as exc:
                errors.append(unplannable(link, tp, "whether it already holds copies of the partition", exc))
                continue
            if isinstance(lost, PartitionError):
                errors.append(lost)
                continue
            recovered = lost
            if recovered is not None:
                out.starts[key] = recovered
        begin = copy_start(committed, low, start_offset=EARLIEST if reason else recovered, on_gap=link.on_gap,
                           source=link.source)
        heal = heals.get(key) if begin.lost else None
        if heal is not None:
            if not heal.ok:
                errors.append(unhealed(spec, link, heal))
                continue
            assert spec.archive is not None  # heal_plans: no location, nothing ok
            out.restores[key] = heal.restore(spec.archive)
            log.warning("%s %s[%d]: %s", link.link_id, tp.topic, tp.partition, heal.why)
        # A gap is planned from the link's position, so that its copy runs even when the source holds
        # nothing past the gap: it fails the partition by name (``fail``) or records the loss (``skip``).
        start = begin.position if begin.lost and begin.position is not None else begin.offset
        work = cap(PartitionWork(link.link_id, tp.topic, tp.partition, start, end,
                                 must_run=reason is not None or recovered is not None),
                   max_records=link.max_records_per_run)
        if (work.records == 0 and not work.must_run and committed is not None and reason is None
                and committed >= low and checkpoint.expiring):
            # idle, and old enough that Kafka would soon delete it: commit it again, fenced like a copy
            work = replace(work, must_run=True)
            out.keep_alive.add(key)
        if work.records > 0 or work.must_run:
            out.works.append(work)
    if out.keep_alive:
        log.info("%s: %d idle checkpoint(s) on %s are committed again so that they do not expire "
                 "(offsets.retention.minutes %.0f)", link.link_id, len(out.keep_alive), link.target,
                 read.retention_s / 60)
    return out


def _may_hold_copies(read: LinkReads, key: Key, found: Mapping[Key, Checkpoint]) -> bool:
    """Whether the target may hold copies of a partition the link has no checkpoint of (it has records to copy)."""
    checkpoint = found[key]
    return checkpoint.committed is None and checkpoint.set_aside is None and read.ends[key] > read.lows[key]


def _checkpoints(read: LinkReads, now: float, refresh_after: float) -> dict[Key, Checkpoint]:
    """What the link's checkpoint says of each partition to plan (a partition without one: ``committed`` None)."""
    out = {}
    for tp in read.tps:
        committed, metadata = read.checkpoints.get((tp.topic, tp.partition), (None, ""))
        source_id, target_id = read.ids["source"].get(tp.topic), read.ids["target"].get(tp.topic)
        out[(tp.topic, tp.partition)] = Checkpoint(
            committed, metadata, set_aside(metadata, source_id, target_id), source_recreated(metadata, source_id),
            needs_keep_alive(metadata, now, refresh_after))
    return out


def _gaps(read: LinkReads, found: Mapping[Key, Checkpoint]) -> dict[Key, tuple[int, int]]:
    """Partitions whose checkpoint, not set aside, lies below the source's earliest offset: retention took
    offsets the link has not copied. Per partition: the checkpoint and the earliest offset."""
    return {key: (committed, read.lows[key]) for key, (committed, _) in read.checkpoints.items()
            if committed is not None and key in read.lows and committed < read.lows[key]
            and found[key].set_aside is None}


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
