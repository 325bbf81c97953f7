"""What a link's target already holds of what the link passes on, once the link's source topic was recreated.

A cluster inside the tree passes other clusters' messages on. When its topic is
deleted and created again, the links into it fill the new topic again from their
sources (Kafka dropped their checkpoints with the old topic), and its links out
start over at the new topic's first offset (:func:`mirrorflow.copy.state.checkpoints.set_aside`).
Their targets already hold most of what that refill brings; copying it again
would duplicate it, and leaving it out would lose what was still in flight when
the topic was deleted (on the old topic, not yet passed on).

The target's copies say exactly what it holds. The copies a level-L link brought
are the ones whose flags have bit L as their lowest bit set (no lower one), and of
each origin partition they are a prefix: one path, in order, each message once.
So per origin cluster, the highest origin offset held is the whole answer
(:func:`held_on_target`): a copy at or below it is skipped, one above it goes on.
Once the link has read past an origin's floor, the floor is dropped at the next
commit: a later incarnation of that origin's own topic starts its offsets at 0
again and must not be taken for what was held. The floors travel in the
checkpoint's metadata (:class:`mirrorflow.copy.state.checkpoints.CheckpointMeta`), so a
copy killed half way, or the next run, goes on with the same ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mirrorflow import copyflags, provenance
from mirrorflow.copy.state.checkpoints import CheckpointMeta, source_recreated
from mirrorflow.copy.state.copies import CopyScanner
from mirrorflow.copy.task import PartitionTask
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import ClusterClient, read_headers


class HeldUnknown(MirrorflowError):
    """The source topic was recreated after the run was planned: what the target holds was not measured."""


def held_on_target(target: ClusterClient, source: str, level: int, topic: str, partition: int,
                   timeout: float) -> tuple[dict[str, int], int]:
    """Per origin cluster other than ``source``: the highest origin offset of ``topic[partition]`` that
    ``target`` holds through a level-``level`` link; and the target partition's earliest offset (above 0:
    retention deleted copies, and an origin whose copies are all gone cannot be told from a new one)."""
    own = copyflags.bit(level)
    lower = copyflags.mask(level)
    floors: dict[str, int] = {}
    with CopyScanner(target) as scanner:
        earliest = scanner.earliest(topic, partition, timeout)
        for origin, msg in scanner.records(topic, partition, timeout):
            if origin is None or origin.cluster == source or (origin.topic, origin.partition) != (topic, partition):
                continue
            flags, malformed, _, _ = copyflags.read_flags(read_headers(msg))
            if malformed or flags & lower != own:
                continue  # not brought by a link of this level
            if origin.offset > floors.get(origin.cluster, -1):
                floors[origin.cluster] = origin.offset
    return floors, earliest


class Held:
    """The floors of one partition's copy: which copies its target holds already (see the module)."""

    def __init__(self, topic: str, partition: int, floors: Mapping[str, int]) -> None:
        self.topic, self.partition = topic, partition
        self._floors = dict(floors)
        self._passed: set[str] = set()  # origins read past since the last commit

    def skips(self, origin: provenance.Origin | None) -> bool:
        """Whether the copy of a message with this origin is one the target holds already."""
        if origin is None or (origin.topic, origin.partition) != (self.topic, self.partition):
            return False
        floor = self._floors.get(origin.cluster)
        if floor is None:
            return False
        if origin.offset >= floor:
            self._passed.add(origin.cluster)
        return origin.offset <= floor

    def floors(self) -> tuple[tuple[str, int], ...]:
        """What the next checkpoint keeps: the floors not read past yet."""
        return tuple(sorted((c, f) for c, f in self._floors.items() if c not in self._passed))

    def settle(self) -> None:
        """After a commit: the floors read past are gone for good."""
        for cluster in self._passed:
            self._floors.pop(cluster, None)
        self._passed.clear()

    def forget(self) -> None:
        """After an abort: what was read since the last commit is read again."""
        self._passed.clear()


def held_at_start(task: PartitionTask, metadata: str, set_aside_because: str | None) -> Held | None:
    """The floors a copy of ``task`` starts with: the planner's, when the source topic was recreated
    (the checkpoint is set aside); else the checkpoint's own. Raises :class:`HeldUnknown` when the
    source was recreated after planning (the next run measures them)."""
    if set_aside_because is not None:
        if not source_recreated(metadata, task.source_topic_id):
            return None  # the target topic was recreated: it holds nothing
        if task.held is None:
            raise HeldUnknown(f"the source topic was recreated after this run was planned ({set_aside_because}); "
                              f"nothing copied, the next run measures what {task.target} holds already")
        return Held(task.topic, task.partition, dict(task.held))
    meta = CheckpointMeta.decode(metadata)
    return Held(task.topic, task.partition, dict(meta.held)) if meta is not None and meta.held else None


Decide = Callable[[list[tuple[str, bytes | None]] | None, int], tuple[list[tuple[str, bytes | None]] | None,
                                                                        str | None]]


def skipping_held(for_copy: Decide, held: Held | None) -> Decide:
    """``for_copy`` (:meth:`mirrorflow.copy.headers.CopyHeaders.for_copy`) that also skips what ``held`` holds."""
    if held is None:
        return for_copy

    def decide(headers: list[tuple[str, bytes | None]] | None,
               offset: int) -> tuple[list[tuple[str, bytes | None]] | None, str | None]:
        out, reason = for_copy(headers, offset)
        if out is not None and held.skips(provenance.find(out, held.topic, held.partition)):
            return None, reason
        return out, reason

    return decide
