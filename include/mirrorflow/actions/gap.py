"""An operator's decision for a partition a copy stopped on: ``mirror_resolve_gap``.

A copy stops instead of guessing when the source lost offsets the link had not
copied (``on_gap: fail``, docs/exactly-once.md). Resolving moves the link's
checkpoint, fenced like a copy, and only in ways that neither drop what the
source still holds nor copy again what the target already holds:

- ``skip``: past a retention gap, to the source's first offset; the lost range
  is recorded in a journal line;
- ``resume_from``: to a given offset. Forward only over offsets the source no
  longer holds or the target already holds copies of (a lost checkpoint);
  backward only over offsets of which the target holds no copy (read from the
  provenance stamped on the target's copies; counted over what the link copies,
  its source's own records and the copies it passes on: :func:`mirrorflow.copy.state.recovery.range_copies`);
- ``rewind``: after the source was truncated and written again
  (:mod:`mirrorflow.copy.state.history`), back to the first offset whose record is no
  longer the one copied, so that the records written again are copied; the
  copies of the records the source lost stay on the target;
- ``restore``: past a retention gap by copying it from the source's S3 archive
  (:mod:`mirrorflow.copy.heal.archive`), through the link's own transactions, up to the
  source's first offset; refused, naming what is missing, unless the archive
  holds the whole gap;
- ``restore_and_skip``: the same for what the archive holds, stepping over only
  the offsets it lacks (each such range is recorded as lost).

:func:`decide` is the rule (pure); :func:`resolve` reads the positions, applies it
and writes the journal line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from confluent_kafka import TopicPartition

from mirrorflow.copy import PartitionTask
from mirrorflow.copy.engine import copy_partition, fenced_commit
from mirrorflow.copy.heal import Heal, NotProven, heal_plans, origin_source
from mirrorflow.copy.state import (
    CheckpointMeta,
    Difference,
    Held,
    first_difference,
    range_copies,
    read_checkpoints,
    source_recreated,
)
from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_warning
from mirrorflow.kafka import ClusterClient, earliest_and_stable, topic_ids

log = logging.getLogger(__name__)

Action = Literal["skip", "resume_from", "rewind", "restore", "restore_and_skip"]
ACTIONS: tuple[Action, ...] = ("skip", "resume_from", "rewind", "restore", "restore_and_skip")


class ResolveRefused(MirrorflowError):
    """The action would drop or duplicate messages, or there is nothing to resolve; nothing was changed."""


@dataclass(frozen=True)
class Decision:
    """Where the checkpoint moves, and what that gives up (``lost``: ``[first, last]`` the source no longer holds)."""

    position: int
    lost: tuple[int, int] | None = None


def decide(action: str, checkpoint: int | None, earliest: int, end: int, *, requested: int | None = None,
           copies_on_target: int = 0, copyable: int | None = None, difference: Difference | None = None) -> Decision:
    """The new checkpoint for ``action``, or :class:`ResolveRefused` saying why not.

    ``checkpoint`` is the link's committed position (``None``: none), ``earliest``
    and ``end`` the source partition's first and last stable offsets, ``requested``
    the offset of ``resume_from``, ``copies_on_target`` how many copies of the
    offsets between the current position and ``requested`` the target holds (the
    ones that would be copied again, or the ones that would be stepped over),
    ``copyable`` how many of the offsets stepped over the link copies at all (the copy flags
    skip the others; ``None``: every one), ``difference`` where the source's history first
    differs from the copies (``rewind``).
    """
    if action == "rewind":
        return _rewind(checkpoint, requested, difference)
    if action == "skip":
        if checkpoint is None:
            raise ResolveRefused("the link has no checkpoint here: there is no gap to skip (its first copy starts at "
                                 "the source's first offset by itself)")
        if checkpoint >= earliest:
            raise ResolveRefused(f"there is no gap: the checkpoint {checkpoint} is inside the source's log "
                                 f"({earliest}..{end}); skipping would drop messages the source still holds")
        return Decision(earliest, (checkpoint, earliest - 1))
    if action != "resume_from":
        raise ResolveRefused(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
    if requested is None or requested < 0:
        raise ResolveRefused(f"resume_from needs an offset (0 or more), got {requested!r}")
    if requested > end:
        raise ResolveRefused(f"offset {requested} is past the source's end {end}")
    current = earliest if checkpoint is None else checkpoint
    if requested == current:
        raise ResolveRefused(f"the link already resumes at {requested}: nothing to change")
    if requested > current:
        held = requested - max(current, earliest)  # offsets the source still holds and the move steps over
        needed = held if copyable is None else min(copyable, held)  # of those, the ones the link copies
        if held > 0 and copies_on_target < needed:
            raise ResolveRefused(f"resuming at {requested} would drop offsets {max(current, earliest)}.."
                                 f"{requested - 1}, which the source still holds: the target holds copies of only "
                                 f"{copies_on_target} of the {needed} the link copies")
        lost = (current, min(requested, earliest) - 1) if current < earliest else None
        return Decision(requested, lost)
    if copies_on_target:
        raise ResolveRefused(f"resuming at {requested} would copy again {copies_on_target} message(s) of offsets "
                             f"{requested}..{current - 1} that the target already holds")
    if requested < earliest:
        raise ResolveRefused(f"offset {requested} is below the source's first offset {earliest}: resume at "
                             f"{earliest} or later")
    return Decision(requested)


def _rewind(checkpoint: int | None, requested: int | None, difference: Difference | None) -> Decision:
    if checkpoint is None:
        raise ResolveRefused("the link has no checkpoint here: there is nothing to rewind")
    if difference is None or difference.offset is None:
        raise ResolveRefused(f"nothing to rewind: {difference.why if difference else 'the history was not compared'}")
    at = difference.offset
    if at >= checkpoint:
        raise ResolveRefused(f"nothing to rewind: the history first differs at {at}, not below the checkpoint "
                             f"{checkpoint}")
    if requested is not None and requested != at:
        harm = ("copy again messages the target holds" if requested < at
                else "skip messages the source wrote again")
        raise ResolveRefused(f"the source's history first differs at offset {at} ({difference.why}): rewind resumes "
                             f"exactly there; offset {requested} would {harm}")
    return Decision(at)


@dataclass
class Resolution:
    link_id: str
    source: str
    target: str
    topic: str
    partition: int
    action: str
    checkpoint: int | None
    earliest: int
    end: int
    position: int
    lost: list[int] | None
    dry_run: bool
    #: How the decision was found (``rewind``: where the history differs; ``restore``: what the archive holds).
    note: str | None = None
    #: Records restored from the archive (``restore``, ``restore_and_skip``).
    restored: int = 0
    #: ``[first, last]`` ranges no archive held, stepped over and lost (``restore_and_skip``).
    missing: list[list[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve(link_id: str, level: int, source: ClusterClient, target: ClusterClient, topic: str, partition: int,
            action: str, *, requested: int | None = None, dry_run: bool = False, timeout: float = 30.0,
            archive: Mapping[str, Any] | None = None, archived: Sequence[str] = ()) -> Resolution:
    """Apply ``action`` to the link's checkpoint of ``topic[partition]`` on ``target`` (not in a dry run).

    ``archive`` and ``archived`` are for the restores: the archive's location
    (``ArchiveLocation.to_dict()``) and the archived clusters.
    """
    tp = TopicPartition(topic, partition)
    checkpoint, metadata = read_checkpoints(target, link_id, [tp], timeout).get((topic, partition), (None, ""))
    lows, ends = earliest_and_stable(source, [tp], timeout)
    earliest, end = lows[(topic, partition)], ends[(topic, partition)]
    if action in ("restore", "restore_and_skip"):
        return _restore(link_id, level, source, target, topic, partition, checkpoint, earliest, end, archive,
                        archived, dry_run, timeout, metadata, action)
    difference = None
    if action == "rewind" and checkpoint is not None:
        meta = CheckpointMeta.decode(metadata)
        difference = first_difference(source, target, topic, partition, checkpoint, earliest, end,
                                      meta.last if meta else None, timeout)
    copies, copyable = 0, None
    if action == "resume_from" and requested is not None and 0 <= requested <= end:
        # what the link copies of the offsets between, and what the target holds of it: the source's
        # own records and the copies from other clusters it passes on
        current = earliest if checkpoint is None else checkpoint
        first, last = (requested, current) if requested < current else (max(current, earliest), requested)
        between = range_copies(source, target, level, topic, partition, max(first, earliest), last, timeout)
        copies, copyable = between.held, between.copied
    decision = decide(action, checkpoint, earliest, end, requested=requested, copies_on_target=copies,
                      copyable=copyable, difference=difference)
    out = Resolution(link_id, source.name, target.name, topic, partition, action, checkpoint, earliest, end,
                     decision.position, list(decision.lost) if decision.lost else None, dry_run,
                     difference.why if difference else None)
    if not dry_run:
        _commit(link_id, level, source, target, topic, partition, decision.position, metadata, timeout)
    journal_warning("gap_resolved", **out.to_dict())
    return out


def _restore(link_id: str, level: int, source: ClusterClient, target: ClusterClient, topic: str, partition: int,
             checkpoint: int | None, earliest: int, end: int, archive: Mapping[str, Any] | None,
             archived: Sequence[str], dry_run: bool, timeout: float, metadata: str, action: str) -> Resolution:
    """Copy the gap ``[checkpoint, earliest)`` from the archive of ``source``, exactly once, or refuse naming why.

    ``restore_and_skip`` restores what the archive holds and steps over only the
    offsets it lacks, each stepped-over range recorded as lost.
    """
    if checkpoint is None:
        raise ResolveRefused("the link has no checkpoint here: there is no gap to restore (its first copy starts at "
                             "the source's first offset by itself)")
    if checkpoint >= earliest:
        raise ResolveRefused(f"there is no gap: the checkpoint {checkpoint} is inside the source's log "
                             f"({earliest}..{end}); the next level run copies from there")
    heal = heal_plans(archive, archived, source.name, {(topic, partition): (checkpoint, earliest)})[(topic, partition)]
    if not heal.ok and (action == "restore" or heal.unavailable is not None or not heal.covered):
        hint = ("; restore_and_skip restores what the archive holds and steps over only the rest"
                if action == "restore" and heal.covered and heal.unavailable is None else "")
        raise ResolveRefused(heal.why + hint)
    if heal.by_origin:
        try:
            return _restore_by_origin(link_id, level, source, target, topic, partition, checkpoint, earliest, end,
                                      archive, heal, dry_run, timeout, action)
        except ResolveRefused as exc:
            if action != "restore_and_skip" or not heal.covered:
                raise
            log.warning("%s %s[%d]: %s; restoring what the archive of %s holds and stepping over the rest", link_id,
                        topic, partition, exc, source.name)
            heal = replace(heal, by_origin=())
    missing = [[a, b - 1] for a, b in heal.missing] or None
    out = Resolution(link_id, source.name, target.name, topic, partition, action, checkpoint, earliest, end,
                     earliest, None, dry_run, heal.why, missing=missing)
    if not dry_run:
        assert archive is not None  # heal_plans: nothing is ok without a location
        ids_source, ids_target = topic_ids(source, [topic], timeout), topic_ids(target, [topic], timeout)
        at = checkpoint
        for first, nxt in heal.covered:
            if first > at:  # a hole in the archive: given up, fenced like a skip
                _commit(link_id, level, source, target, topic, partition, first, metadata, timeout)
                log.warning("%s %s[%d]: offsets %d..%d are in no archive: stepped over, lost", link_id, topic,
                            partition, at, first - 1)
            task = PartitionTask(link_id=link_id, level=level, source=source.name, target=target.name, topic=topic,
                                 partition=partition, end_offset=nxt,
                                 restore={**heal.restore(archive), "end": nxt}, on_gap="restore",
                                 source_topic_id=ids_source.get(topic), target_topic_id=ids_target.get(topic))
            result = copy_partition(task, source, target, op_timeout=timeout)
            out.position, out.restored = result.next_offset, out.restored + result.restored
            if result.error is not None:  # fenced by a level run, the archive unreadable: a retry goes on from here
                journal_warning("gap_resolved", **out.to_dict(), error=result.error)
                raise MirrorflowError(f"{link_id} {topic}[{partition}]: the restore stopped at source offset "
                                      f"{result.error_offset}: {result.error}")
            at = nxt
            metadata = read_checkpoints(target, link_id, [TopicPartition(topic, partition)], timeout).get(
                (topic, partition), (None, ""))[1]
        if at < earliest:
            _commit(link_id, level, source, target, topic, partition, earliest, metadata, timeout)
            log.warning("%s %s[%d]: offsets %d..%d are in no archive: stepped over, lost", link_id, topic, partition,
                        at, earliest - 1)
        out.position = earliest
        log.info("%s %s[%d]: restored %d record(s) of offsets %d..%d from the archive of %s; the checkpoint on %s "
                 "is now %d", link_id, topic, partition, out.restored, checkpoint, earliest - 1, source.name,
                 target.name, earliest)
    journal_warning("gap_resolved", **out.to_dict())
    return out


def _restore_by_origin(link_id: str, level: int, source: ClusterClient, target: ClusterClient, topic: str,
                       partition: int, checkpoint: int, earliest: int, end: int, archive: Mapping[str, Any] | None,
                       heal: Heal, dry_run: bool, timeout: float, action: str) -> Resolution:
    """The gap from other clusters' archives by provenance (mirrorflow.copy.heal.origin): all of it, or refused."""
    assert archive is not None  # heal_plans names other archives only with a location
    restore = heal.restore(archive)
    try:  # proven here first, so that a refusal is one (the copier proves it again, in its transaction)
        _, said = origin_source(source, target, level, topic, partition, checkpoint, earliest, restore, timeout)
    except NotProven as exc:
        raise ResolveRefused(f"{heal.why}; refused: {exc}") from None
    out = Resolution(link_id, source.name, target.name, topic, partition, action, checkpoint, earliest, end,
                     earliest, None, dry_run, f"{heal.why}: {said}")
    if not dry_run:
        ids_source, ids_target = topic_ids(source, [topic], timeout), topic_ids(target, [topic], timeout)
        task = PartitionTask(link_id=link_id, level=level, source=source.name, target=target.name, topic=topic,
                             partition=partition, end_offset=earliest, restore=restore, on_gap="restore",
                             source_topic_id=ids_source.get(topic), target_topic_id=ids_target.get(topic))
        result = copy_partition(task, source, target, op_timeout=timeout)
        out.position, out.restored = result.next_offset, result.restored
        if result.error is not None:
            journal_warning("gap_resolved", **out.to_dict(), error=result.error)
            raise MirrorflowError(f"{link_id} {topic}[{partition}]: the restore stopped at source offset "
                                  f"{result.error_offset}: {result.error}")
    journal_warning("gap_resolved", **out.to_dict())
    return out


def _commit(link_id: str, level: int, source: ClusterClient, target: ClusterClient, topic: str, partition: int,
            position: int, metadata: str, timeout: float) -> None:
    """Commit ``position`` as the link's checkpoint through the link's own ``transactional.id``.

    ``init_transactions`` fences any copy of the partition still running, so the
    checkpoint cannot be overwritten by a copy that started before the decision.
    Floors the checkpoint keeps after a recreated source (``metadata``, mirrorflow.copy.state.held)
    stay as long as the source topic is the same one.
    """
    ids_source, ids_target = topic_ids(source, [topic], timeout), topic_ids(target, [topic], timeout)
    task = PartitionTask(link_id=link_id, level=level, source=source.name, target=target.name, topic=topic,
                         partition=partition, end_offset=position, source_topic_id=ids_source.get(topic),
                         target_topic_id=ids_target.get(topic))
    meta = CheckpointMeta.decode(metadata)
    held = None
    if meta is not None and meta.held and not source_recreated(metadata, task.source_topic_id):
        held = Held(topic, partition, dict(meta.held))
    fenced_commit(task, target, [TopicPartition(topic, partition, position)], None, timeout, {partition: held})
    log.info("%s %s[%d]: checkpoint on %s is now %d", link_id, topic, partition, target.name, position)
