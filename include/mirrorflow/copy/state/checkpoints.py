"""A link's checkpoint: where it is kept, how it is read, and where a copy starts from it.

The checkpoint of a link is the committed offset of the link's own consumer group
on the *target*, per source topic-partition (the target holds the same partitions,
since topics are mirrored partition-for-partition). It is written only inside the
copy's transaction (``send_offsets_to_transaction``), so copies and checkpoint
become visible together; docs/architecture.md ("Checkpoints and exactly-once")
tells the whole protocol. This module is its one home:

- the group's name (:func:`checkpoint_group`);
- the switch mark, metadata a link switch leaves on the *old* target so that a
  stale copier stops (:data:`SWITCHED_MARK`, :func:`switched_to`);
- what a checkpoint says besides its offset (:class:`CheckpointMeta`): the ids of
  the source and target topics it was written for, so that a checkpoint of a
  deleted and recreated topic is set aside instead of trusted (:func:`set_aside`),
  and the last record read before it, so that a truncated source is noticed
  (:mod:`mirrorflow.copy.state.history`);
- reading checkpoints: inside a copy, after fencing and with coordinator retries
  (:func:`read_positions`), and from the driver or a monitor (:func:`read_checkpoints`);
- where a copy starts (:func:`copy_start`): pure, for every path (level runs,
  transaction groups, backfills, restores) and the planner; :func:`record_start`
  writes that decision into a copy's result the same way on every path.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirrorflow import formats
from mirrorflow.copy.state.history import LastRead
from mirrorflow.copy.task import OnGap, PartitionResult, PartitionTask
from mirrorflow.defaults import DEFAULT_ON_GAP
from mirrorflow.formats import NewerFormat
from mirrorflow.internal_names import checkpoint_group
from mirrorflow.kafka import RETRIABLE_COORDINATOR, ClusterClient, committed_offsets

log = logging.getLogger(__name__)

#: Checkpoint metadata written on a link's *old* target when the link is switched away
#: (see :mod:`mirrorflow.actions.switch`): a copier that still aims at that target stops.
SWITCHED_MARK = "mirrorflow:switched-to="

#: ``PartitionTask.start_offset`` meaning "the source's earliest offset when the copy starts".
EARLIEST = -1


def switch_mark(new_target: str) -> str:
    """The checkpoint metadata that says the link now copies to ``new_target``."""
    return f"{SWITCHED_MARK}{new_target}"


def switched_to(metadata: str | None) -> str | None:
    """The new target a checkpoint's metadata names, or ``None`` if the link was not switched away."""
    if metadata and metadata.startswith(SWITCHED_MARK):
        return metadata[len(SWITCHED_MARK):]
    return None


#: Checkpoint metadata written on a link's checkpoints when they were carried to a new link id
#: (levels renumbered, :mod:`mirrorflow.actions.renumber`): a copier of the old topology stops.
CARRIED_MARK = "mirrorflow:carried-to="


def carry_mark(new_link: str) -> str:
    """The checkpoint metadata that says the link's checkpoints now belong to ``new_link``."""
    return f"{CARRIED_MARK}{new_link}"


def carried_to(metadata: str | None) -> str | None:
    """The new link id a checkpoint's metadata names, or ``None`` if it was not carried away."""
    if metadata and metadata.startswith(CARRIED_MARK):
        return metadata[len(CARRIED_MARK):]
    return None


#: Prefix of the metadata every copy commits with its checkpoint (format 1, :data:`mirrorflow.formats.FORMATS`).
META_PREFIX = "mirrorflow:v1;"
_OURS = "mirrorflow:"
_KNOWN = (META_PREFIX, SWITCHED_MARK, CARRIED_MARK)


def checked(metadata: str, where: str) -> str:
    """``metadata``, when this mirrorflow knows its format; one a newer mirrorflow wrote raises NewerFormat.

    Read as anything else, a newer checkpoint would be taken for one written before
    metadata existed: its next commit would rewrite it in this format and drop what
    this code does not know (floors it must keep, marks it must obey).
    """
    if metadata.startswith(_OURS) and not metadata.startswith(_KNOWN):
        head = metadata[len(_OURS):].partition(";")[0]
        if head[:1] == "v" and head[1:].isdigit():
            formats.check("checkpoint", int(head[1:]), where)
        raise NewerFormat("checkpoint", repr(head.partition("=")[0]), where)
    return metadata


@dataclass(frozen=True)
class CheckpointMeta:
    """What a checkpoint says besides its offset.

    The incarnations it belongs to: Kafka's topic ids of the source and target
    topic (a topic that is deleted and created again gets a new id, and its
    offsets start over; a checkpoint of the old incarnation says nothing about the
    new one). And the last record the link read before it (:mod:`mirrorflow.copy.state.history`),
    so that a source that was truncated and written again is noticed.
    """

    source_topic_id: str | None = None
    target_topic_id: str | None = None
    last: LastRead | None = None
    #: When it was committed (Unix seconds): Kafka deletes the offsets of a group without
    #: members ``offsets.retention.minutes`` after their last commit, so idle links commit again.
    at: int | None = None
    #: After the source topic was recreated: per origin cluster, the highest origin offset the
    #: target held already (:mod:`mirrorflow.copy.state.held`), until the link reads past it.
    held: tuple[tuple[str, int], ...] = ()

    def encode(self) -> str:
        text = f"{META_PREFIX}source={self.source_topic_id or ''};target={self.target_topic_id or ''}"
        if self.last is not None:
            text += f";last={self.last.encode()}"
        if self.at is not None:
            text += f";at={self.at}"
        if self.held:
            text += ";held=" + ",".join(f"{cluster}:{floor}" for cluster, floor in self.held)
        return text

    def committed_now(self, last: LastRead | None, held: tuple[tuple[str, int], ...] = ()) -> CheckpointMeta:
        """This metadata for a commit now, after reading up to ``last``, keeping the floors ``held``."""
        return CheckpointMeta(self.source_topic_id, self.target_topic_id, last, int(time.time()), held)

    @classmethod
    def decode(cls, metadata: str | None) -> CheckpointMeta | None:
        """The metadata a copy committed; ``None`` for anything else (older checkpoints, a switch's own)."""
        if not metadata or not metadata.startswith(META_PREFIX):
            return None
        fields = dict(part.partition("=")[::2] for part in metadata[len(META_PREFIX):].split(";") if part)
        at = fields.get("at", "")
        return cls(fields.get("source") or None, fields.get("target") or None, LastRead.decode(fields.get("last")),
                   int(at) if at.isdigit() else None, _decode_held(fields.get("held", "")))


def _decode_held(text: str) -> tuple[tuple[str, int], ...]:
    """``c3:39,c4:12`` -> ``(("c3", 39), ("c4", 12))``; a part that is not ``cluster:offset`` is left out."""
    out = []
    for part in text.split(","):
        cluster, _, floor = part.rpartition(":")
        if cluster and floor.isdigit():
            out.append((cluster, int(floor)))
    return tuple(out)


def needs_keep_alive(metadata: str, now: float, refresh_after_s: float) -> bool:
    """Whether a checkpoint should be committed again before Kafka deletes it as expired.

    True when it was committed more than ``refresh_after_s`` ago, or at a time it
    does not say (written before commit times were recorded).
    """
    meta = CheckpointMeta.decode(metadata)
    return meta is None or meta.at is None or now - meta.at >= refresh_after_s


def set_aside(metadata: str | None, source_topic_id: str | None, target_topic_id: str | None) -> str | None:
    """Why a checkpoint belongs to another incarnation of its source or target topic; ``None`` if it does not.

    Only ids known on both sides are compared: a checkpoint written before ids were
    recorded, or a copy that does not know them, keeps its checkpoint.
    """
    meta = CheckpointMeta.decode(metadata)
    if meta is None:
        return None
    if source_topic_id and meta.source_topic_id and meta.source_topic_id != source_topic_id:
        return (f"the source topic was recreated (topic id {meta.source_topic_id} -> {source_topic_id}): the new "
                f"topic is copied from its first offset")
    if target_topic_id and meta.target_topic_id and meta.target_topic_id != target_topic_id:
        return (f"the target topic was recreated (topic id {meta.target_topic_id} -> {target_topic_id}): the "
                f"source is copied again from its first offset into the new topic")
    return None


def source_recreated(metadata: str | None, source_topic_id: str | None) -> bool:
    """Whether the checkpoint was written for another incarnation of the source topic (see :func:`set_aside`)."""
    meta = CheckpointMeta.decode(metadata)
    return bool(meta and source_topic_id and meta.source_topic_id and meta.source_topic_id != source_topic_id)


class LinkSwitchedAway(Exception):
    """The link's checkpoint on this target says the link now copies to another target."""

    def __init__(self, link_id: str, target: str, new_target: str) -> None:
        self.new_target = new_target
        super().__init__(f"link {link_id} was switched from {target} to {new_target}; this copy "
                         f"to {target} is stale and copies nothing (the next run uses {new_target})")


class LinkCarriedAway(LinkSwitchedAway):
    """The link's checkpoints were carried to a new link id: this copy runs the old topology."""

    def __init__(self, link_id: str, target: str, new_link: str) -> None:
        Exception.__init__(self, f"the checkpoints of link {link_id} on {target} were carried to {new_link} (the "
                                 f"levels were renumbered); this copy runs the old topology and copies nothing")
        self.new_target = target
        self.new_link = new_link


def read_positions(consumer: Consumer, link_id: str, target: str, topic: str, partitions: list[int],
                   timeout: float) -> dict[int, tuple[int | None, str]]:
    """The link's committed positions of ``topic``'s ``partitions`` (one request) and their metadata.

    The position is ``None`` where there is none.

    Read with the copy's own consumer of the link's group, after the copy's producer
    fenced every older one, so nobody else moves them now. Retried while the group
    coordinator moves or loads; a switch mark raises :class:`LinkSwitchedAway`, a carry
    mark :class:`LinkCarriedAway`.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout)
            out: dict[int, tuple[int | None, str]] = {}
            for tp in answer:
                if tp.error is not None:
                    raise KafkaException(tp.error)
                new_target = switched_to(tp.metadata)
                if new_target is not None:
                    raise LinkSwitchedAway(link_id, target, new_target)
                new_link = carried_to(tp.metadata)
                if new_link is not None:
                    raise LinkCarriedAway(link_id, target, new_link)
                metadata = checked(tp.metadata or "", f"group {checkpoint_group(link_id)} on {target}, "
                                                      f"{topic}[{tp.partition}]")
                out[tp.partition] = (None if tp.offset < 0 else tp.offset, metadata)
            return out
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                raise
            log.info("%s %s%s: reading the checkpoints: %s; retrying", link_id, topic, partitions, err.name())
            time.sleep(0.2)  # back-off between retries of a retriable error


def read_checkpoints(target: ClusterClient, link_id: str, tps: list[TopicPartition],
                     timeout: float = 30.0) -> dict[tuple[str, int], tuple[int | None, str]]:
    """``(topic, partition) -> (committed offset or None, metadata)`` of the link's group on the target.

    For readers outside a copy (the planner, a switch, the lag monitor): it opens
    and closes its own consumer and names the link in its errors. Topics are logical
    names, asked under the target's names (a checkpoint is committed on the target's topic).
    """
    answer = committed_offsets(target, target.own(checkpoint_group(link_id)), target.on_cluster(tps),
                               f"checkpoints of link {link_id}", timeout)
    out: dict[tuple[str, int], tuple[int | None, str]] = {}
    for tp in answer:
        metadata = checked(tp.metadata or "", f"group {target.own(checkpoint_group(link_id))} on {target.name}, "
                                              f"{tp.topic}[{tp.partition}]")
        out[(target.logical(tp.topic) or tp.topic, tp.partition)] = (tp.offset if tp.offset >= 0 else None, metadata)
    return out


@dataclass(frozen=True)
class Start:
    """Where one copy of a partition starts, and why.

    ``position`` is where the link stands: its checkpoint, or, for a link that has
    none yet and is told where to begin (onboarding), that first position; ``None``
    when it has neither. ``offset`` is where this copy reads from: ``position``, or
    the source's earliest offset when the source no longer holds what lies between.
    """

    position: int | None
    offset: int
    #: The link had no checkpoint; this copy commits ``position`` as its first (the hand-over point).
    initialised: bool = False
    #: Offsets ``[position, offset)`` the source deleted before the link copied them.
    lost: int = 0
    #: Set when the loss is not allowed (``require_contiguous``): nothing may be copied.
    error: str | None = None
    #: The source cluster's name, for the sentences below.
    source: str = "the source"

    @property
    def why(self) -> str:
        """A sentence for the log: what was decided."""
        if self.lost:
            return (f"offsets {self.position}..{self.offset - 1} are no longer on {self.source} (retention) and "
                    f"were not copied")
        if self.initialised:
            return f"the link had no checkpoint; it starts at {self.position}"
        if self.position is None:
            return f"the link has no checkpoint; it starts at the source's earliest offset {self.offset}"
        return f"the link's checkpoint is {self.position}"


def copy_start(committed: int | None, earliest: int, *, start_offset: int | None = None,
               require_contiguous: bool = False, on_gap: OnGap = DEFAULT_ON_GAP,
               source: str = "the source") -> Start:
    """Where a copy of one partition starts, from the link's checkpoint and the source's earliest offset.

    ``start_offset`` (onboarding) is where a link without a checkpoint begins
    (:data:`EARLIEST`: the source's first offset). A position below the source's
    earliest offset is a retention gap: the source deleted what the link had not
    copied yet. With ``on_gap="skip"`` the copy starts at the earliest offset and
    reports the loss; with ``"fail"`` (or ``require_contiguous``, an onboarding
    from the archive) it refuses to copy past the hole, so nothing is lost in
    silence; so does ``"restore"`` here, where no restore was planned for the
    hole (mirrorflow.copy.heal.archive plans them). ``source`` names the cluster in the sentences.
    """
    position, initialised = committed, False
    if position is None and start_offset is not None:
        position = earliest if start_offset == EARLIEST else start_offset
        initialised = True
    if position is None:
        return Start(None, earliest, source=source)
    if position >= earliest:
        return Start(position, position, initialised, source=source)
    start = Start(position, earliest, initialised, lost=earliest - position, source=source)
    if require_contiguous:
        error = f"{start.why}; nothing copied past them (the archive must reach offset {earliest})"
    elif on_gap == "fail":
        error = (f"retention gap: offsets {position}..{earliest - 1} ({start.lost}) are no longer on {source} "
                 f"and were never copied; the partition stops at {position} (on_gap: fail; on_gap: skip steps "
                 f"over them with a recorded loss)")
    elif on_gap == "restore":  # the planner found the gap too late to plan its restore: the next run does
        error = (f"retention gap: offsets {position}..{earliest - 1} ({start.lost}) are no longer on {source} "
                 f"and were never copied; the partition stops at {position} (on_gap: restore: the next run "
                 f"restores them from the archive of {source})")
    else:
        return start
    return Start(position, earliest, initialised, lost=start.lost, error=error, source=source)


#: How often one copy may be told "out of range" at a position its source still holds before it stops.
MAX_REREADS = 3


def moved_under_copy(task: PartitionTask, position: int, earliest: int, end: int, rereads: int = 0) -> Start:
    """What to do when the source answered a running copy's read at ``position`` with "out of range".

    Retention, ``delete_records`` or an unclean truncation moved the log under the
    copy (its reader never jumps: ``auto.offset.reset=error``). A log start past
    ``position`` is a gap, decided exactly as at the copy's start (:func:`copy_start`,
    ``on_gap``); an end below it is a truncation: the copy stops there, and the next
    run compares the records before it (:mod:`mirrorflow.copy.state.history`). A range
    still readable (a leader moving) is read again from ``position``, unless it was
    already ``rereads`` times and that reaches :data:`MAX_REREADS`.
    """
    if position < earliest:
        return copy_start(position, earliest, require_contiguous=task.require_contiguous, on_gap=task.on_gap,
                          source=task.source)
    if end < position:
        return Start(position, position, source=task.source,
                     error=(f"source truncated: {task.source} {task.topic}[{task.partition}] now ends at {end}, below "
                            f"offset {position} this run had read up to (an unclean leader election, or the topic "
                            f"was recreated); the partition stops at {position}, and the next run compares the "
                            f"records before it with what the link copied"))
    if rereads >= MAX_REREADS:
        return Start(position, position, source=task.source,
                     error=(f"{task.source} answered the read of {task.topic}[{task.partition}] at offset {position} "
                            f"with 'offset out of range' {rereads + 1} times while it holds {earliest}..{end - 1}; "
                            f"the partition stops there"))
    return Start(position, position, source=task.source)


def task_start(task: PartitionTask, committed: int | None, metadata: str, earliest: int) -> tuple[Start, str | None]:
    """Where ``task``'s copy starts (:func:`copy_start`), after setting aside a checkpoint of another incarnation.

    A checkpoint written for an earlier incarnation of the source or target topic
    (:func:`set_aside`) is not a position in this one: the copy starts at the
    source's first offset and commits it even when there is nothing to copy, like
    a new link. Returns the start and, when a checkpoint was set aside, why.
    """
    reason = set_aside(metadata, task.source_topic_id, task.target_topic_id)
    begin = copy_start(None if reason else committed, earliest, start_offset=EARLIEST if reason else task.start_offset,
                       require_contiguous=task.require_contiguous, on_gap=task.on_gap, source=task.source)
    return begin, reason


def trusted_last(begin: Start, committed: int | None, metadata: str, set_aside_because: str | None) -> LastRead | None:
    """The last record read before the checkpoint, when a copy goes on from exactly that checkpoint.

    ``None`` when there is nothing to compare: no checkpoint, one set aside, a gap
    stepped over, or a checkpoint written before records were named.
    """
    if set_aside_because is not None or committed is None or begin.initialised or begin.offset != committed:
        return None
    meta = CheckpointMeta.decode(metadata)
    return meta.last if meta is not None else None


def record_start(result: PartitionResult, begin: Start, set_aside_because: str | None = None) -> bool:
    """Note where a copy starts in its result: the hand-over, a checkpoint set aside, a loss (logged), or a refusal.

    Returns whether the copy may go on; when not, the result holds the error at the
    link's position. Every copy path records its start here, so a loss reads the same
    in every journal line.
    """
    if set_aside_because is not None:
        result.set_aside = set_aside_because
        log.warning("%s %s[%d]: the checkpoint is set aside: %s", result.link_id, result.topic, result.partition,
                    set_aside_because)
    if begin.initialised:  # onboarding, or a new incarnation of a topic: the link's first position
        result.initialised = True
    if not begin.lost:
        return True
    _lost(result, begin)
    if begin.error is not None:
        assert begin.position is not None  # a loss is counted from the link's position (copy_start)
        result.start_offset = result.next_offset = result.error_offset = begin.position
        result.error = begin.error
        return False
    log.warning("%s %s[%d]: %s", result.link_id, result.topic, result.partition, begin.why)
    return True


def record_move(result: PartitionResult, moved: Start) -> bool:
    """Note in a running copy's result what :func:`moved_under_copy` decided; whether the copy may go on.

    The open transaction was committed before (what was read is exact); a loss adds
    to the result's lost ranges, a refusal stops the partition at its position.
    """
    if moved.lost:
        _lost(result, moved)
    if moved.error is not None:
        result.error, result.error_offset = moved.error, moved.position
        log.error("%s %s[%d]: %s", result.link_id, result.topic, result.partition, moved.error)
        return False
    if moved.lost:
        log.warning("%s %s[%d]: during the copy: %s", result.link_id, result.topic, result.partition, moved.why)
    return True


def _lost(result: PartitionResult, start: Start) -> None:
    """Add ``start``'s loss (offsets ``[position, offset)``) to ``result``."""
    assert start.position is not None  # a loss is counted from the link's position (copy_start)
    lost = [start.position, start.offset - 1]
    result.lost_to_retention += start.lost
    result.lost_ranges.append(lost)
    if result.lost_offsets is None:
        result.lost_offsets = lost
