"""What a target's copy of each topic needs to be in its source's shape: a plan, pure (no I/O).

A mirrored topic is copied partition-for-partition (source partition *p* lands in
target partition *p*, which keeps per-key order and makes offsets comparable), so
the target must have exactly the source's partition count, and the configs that
travel with the data (:data:`~mirrorflow.kafka.TRAVELLING_CONFIGS`) follow the
source, or each topic's config owner (:mod:`~mirrorflow.cluster_sync.ownership`).
:func:`plan_shape` compares the shapes: topics to create, partitions to add,
partition-count conflicts, config drift, topics gone from the source. Pure, so
tests and dry runs can call it; :mod:`~mirrorflow.cluster_sync.shape_sync` carries
a plan out. See docs/topics.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.cluster_sync.ownership import ConfigOwnership, TopicVerdict, decide, record
from mirrorflow.declined import Declined
from mirrorflow.errors import MirrorflowError
from mirrorflow.internal_names import is_internal_topic
from mirrorflow.kafka import MAX_MESSAGE_BYTES, TIMESTAMP_TYPE, TRAVELLING_CONFIGS, TopicShape

#: A copy is larger than its original by the two headers mirrorflow stamps on it (copy flags and
#: origin, a few hundred bytes at most), so a record at exactly its topic's limit fits only a copy
#: topic with room for them. :func:`with_headroom` gives that room in a form it recognises again.
HEADROOM_GRID = 4096
HEADROOM_MARK = 1111

LOG_APPEND_TIME = "LogAppendTime"
BEFORE_MAX_MS = "message.timestamp.before.max.ms"
_NO_LIMIT = str(2**63 - 1)


def with_headroom(limit: int) -> int:
    """The ``max.message.bytes`` a copy topic needs so that a copy of any record ``limit`` allows fits.

    ``limit`` rounded up to the next multiple of :data:`HEADROOM_GRID`, plus
    :data:`HEADROOM_MARK` bytes (at least 1,112 bytes more: room for the stamp
    headers). A value of that form already holds the room (a topic mirrorflow
    created or aligned, or a copy of one) and is returned as it is: in a tree,
    where every cluster is a target of the others, the limits reach one value
    instead of growing with each hop.
    """
    if limit % HEADROOM_GRID == HEADROOM_MARK:
        return limit
    return (limit // HEADROOM_GRID + 1) * HEADROOM_GRID + HEADROOM_MARK


@dataclass(frozen=True)
class TopicCreate:
    topic: str
    partitions: int
    configs: dict[str, str]


@dataclass(frozen=True)
class PartitionAdd:
    topic: str
    current: int
    wanted: int


@dataclass(frozen=True)
class ConfigDrift:
    """One travelling config that differs; ``None`` means "not set explicitly" on that side.

    ``source`` is the value the target is compared with: the link source's, or, when the
    topic's configs have an owner (``owner`` names it), the owner's.
    """

    topic: str
    key: str
    source: str | None
    target: str | None
    owner: str = ""


@dataclass(frozen=True)
class ConfigAlign:
    """Make the target's travelling configs equal the source's: ``set`` these, ``delete`` those."""

    topic: str
    set: dict[str, str]
    delete: tuple[str, ...]


@dataclass(frozen=True)
class OwnedConfigs:
    """The owners' side of a plan (:mod:`mirrorflow.cluster_sync.ownership`).

    ``shapes``: each topic's shape on its owner, for the topics the owner has;
    ``records``: what mirrorflow remembers of the target's topics (``None``: not read,
    every difference counts as a local change with no record); ``target``: the
    cluster being shaped (the owner of a topic is never compared with anyone).
    """

    ownership: ConfigOwnership
    target: str
    shapes: Mapping[str, TopicShape]
    records: Mapping[str, Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class ShapeWarning:
    """Something that will work but change what consumers of the copy see."""

    topic: str
    key: str
    value: str
    message: str


class PartitionCountConflict(MirrorflowError):
    """The target topic has more partitions than its source: it cannot be mirrored partition-for-partition.

    Kafka cannot remove partitions, so the copy of this topic on this link stops (the
    others continue). Often it is a passing state: another link grew the topic on the
    target, and the growth has yet to reach this link's source through the tree (a
    pair shows it for one run after every partition increase). Only when no cluster
    should have that many partitions must an operator delete or recreate the target
    topic, and the message says both, so that nobody deletes a grown topic.
    """

    def __init__(self, cluster: str, topic: str, target_partitions: int, source_partitions: int,
                 source_cluster: str = "") -> None:
        self.cluster = cluster
        self.topic = topic
        self.target_partitions = target_partitions
        self.source_partitions = source_partitions
        self.source_cluster = source_cluster
        source = f"on cluster {source_cluster} " if source_cluster else ""
        where = source_cluster or "the source"
        super().__init__(
            f"cluster {cluster or '?'}: topic {topic} has {target_partitions} partitions, more than the "
            f"{source_partitions} of its source {source}- it cannot be mirrored partition-for-partition "
            f"and Kafka cannot remove partitions; copying {topic} on this link stops until {where} has "
            f"{target_partitions} partitions too (when another link grew the topic here, that growth reaches "
            f"{where} through the tree and this clears by itself: do not delete anything) or, when no cluster "
            f"should have {target_partitions}, until the target topic is deleted (mirrorflow recreates it) or "
            f"recreated with {source_partitions} partitions"
        )

    def __reduce__(self):
        return (PartitionCountConflict, (self.cluster, self.topic, self.target_partitions, self.source_partitions,
                                         self.source_cluster))


@dataclass(frozen=True)
class ShapePlan:
    """What :func:`apply_shape` will do on the target, and what it reports but leaves alone."""

    source_cluster: str = ""
    target_cluster: str = ""
    create: tuple[TopicCreate, ...] = ()
    add_partitions: tuple[PartitionAdd, ...] = ()
    align: tuple[ConfigAlign, ...] = ()
    conflicts: dict[str, PartitionCountConflict] = field(default_factory=dict)
    drift: tuple[ConfigDrift, ...] = ()
    deleted_on_source: tuple[str, ...] = ()
    warnings: tuple[ShapeWarning, ...] = ()
    #: Per topic: the target's ``max.message.bytes`` once the plan is applied, and the source's (when known).
    limits: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    #: Topics whose configs follow an owner other than the target: what becomes of each differing key.
    verdicts: tuple[TopicVerdict, ...] = ()
    #: Records to remember once the plan is applied (configs with an owner only): the topics it creates,
    #: and followers found in step with their owner whose record is missing or out of date.
    records: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def declined(self) -> tuple[Declined, ...]:
        """Owner values not applied because the follower would keep less data (reported every run)."""
        return tuple(
            Declined("topic_configs", v.target, f"{v.topic} {k.key}", k.change,
                     f"{v.target}'s own value {k.target_value or '(broker default)'} would keep more data than "
                     f"the owner {v.owner}'s", f"topic_configs.allow_keeping_less: [{k.key}]")
            for v in self.verdicts for k in v.keys if k.action == "decline")

    @property
    def has_changes(self) -> bool:
        """Whether applying the plan would change anything on the target."""
        return bool(self.create or self.add_partitions or self.align)

    @property
    def is_empty(self) -> bool:
        """Nothing to change and nothing to report: source and target have the same shape."""
        return not (self.has_changes or self.conflicts or self.drift or self.deleted_on_source)

    def drift_of(self, topic: str) -> dict[str, tuple[str | None, str | None]]:
        """``key -> (source value, target value)`` for one topic."""
        return {d.key: (d.source, d.target) for d in self.drift if d.topic == topic}


# --------------------------------------------------------------------------- plan


def travelling(configs: Mapping[str, str]) -> dict[str, str]:
    """The subset of ``configs`` that travels with a topic."""
    return {k: v for k, v in configs.items() if k in TRAVELLING_CONFIGS}


def _same(key: str, a: str | None, b: str | None) -> bool:
    if key == "cleanup.policy" and a is not None and b is not None:  # "compact,delete" == "delete,compact"
        return sorted(p.strip() for p in a.split(",")) == sorted(p.strip() for p in b.split(","))
    return a == b


def _warnings(topic: str, configs: Mapping[str, str], timestamp_type: str | None) -> list[ShapeWarning]:
    """Target settings under which the copy differs from its source although it is copied correctly.

    ``configs`` are the travelling configs the target topic will have explicitly,
    ``timestamp_type`` its effective ``message.timestamp.type`` (``None``: not known).
    """
    out = []
    if timestamp_type == LOG_APPEND_TIME:
        out.append(ShapeWarning(
            topic, TIMESTAMP_TYPE, LOG_APPEND_TIME,
            f"{topic}: the target topic uses LogAppendTime, so every copied record gets the time it was "
            "copied instead of its source timestamp (mirrorflow writes CreateTime); time-based retention, "
            "offsets-for-times and timestamp-based offset translation on the target see copy times",
        ))
    before = configs.get(BEFORE_MAX_MS)
    if before is not None and before != _NO_LIMIT:
        out.append(ShapeWarning(
            topic, BEFORE_MAX_MS, before,
            f"{topic}: {BEFORE_MAX_MS}={before} on the target rejects copies of records older than that "
            "at copy time: batch lag and backfills of older data must stay within it",
        ))
    return out


def plan_shape(source_shapes: Mapping[str, TopicShape], target_shapes: Mapping[str, TopicShape],
               *, align_configs: bool = False, owned: OwnedConfigs | None = None) -> ShapePlan:
    """Compare source and target shapes; pure (no I/O), so dry runs and tests can call it.

    - a source topic absent on the target is created with the source's partition count
      and travelling configs;
    - a target with fewer partitions gets partitions added; one with more is a
      :class:`PartitionCountConflict` (that topic only: the others are planned as usual);
    - travelling configs that differ are reported as drift and, only with
      ``align_configs``, aligned (set to the source value, or removed from the target
      when the source does not set them, so the target's broker default applies);
    - a target topic whose source is gone is reported in ``deleted_on_source`` and
      never deleted: that is an operator's decision.

    With ``owned``, a topic's travelling configs follow its owner instead of the link's
    source (:mod:`mirrorflow.cluster_sync.ownership`): a new topic is created with the owner's
    configs when the owner has it, an existing one's differing keys get a verdict
    (applied, kept or reported) and only the keys to apply are aligned, whatever
    ``align_configs`` says; the owner itself is never compared with anyone. A topic its
    owner does not have yet is compared with the source and reported only.

    Internal topics (``__*``, ``_schemas``, ``_mirrorflow*``) are never planned,
    whatever the caller passes in.
    """
    source = {n: s for n, s in source_shapes.items() if not is_internal_topic(n)}
    target = {n: s for n, s in target_shapes.items() if not is_internal_topic(n)}
    source_cluster = next((s.cluster for s in source.values() if s.cluster), "")
    target_cluster = next((s.cluster for s in target.values() if s.cluster), "")

    create: list[TopicCreate] = []
    add: list[PartitionAdd] = []
    align: list[ConfigAlign] = []
    conflicts: dict[str, PartitionCountConflict] = {}
    drift: list[ConfigDrift] = []
    warnings: list[ShapeWarning] = []

    limits: dict[str, tuple[int | None, int | None]] = {}
    verdicts: list[TopicVerdict] = []
    records: dict[str, dict[str, Any]] = {}
    for name in sorted(source):
        src = source[name]
        wanted = travelling(src.configs)
        need = with_headroom(src.max_message_bytes) if src.max_message_bytes is not None else None
        tgt = target.get(name)
        owner = owned.ownership.owner_of(name) if owned is not None else None
        owner_shape = owned.shapes.get(name) if owned is not None else None
        if owned is not None and owner_shape is not None and owner != owned.target:
            wanted = _owner_values(owner_shape, owned.ownership)
        elif owned is not None:
            wanted = {k: v for k, v in wanted.items() if k not in owned.ownership.exclude}
        if tgt is None:
            if need is not None and not (owned is not None and MAX_MESSAGE_BYTES in owned.ownership.exclude):
                # room for the stamp headers (with_headroom), and never less than copies from this source need
                wanted[MAX_MESSAGE_BYTES] = str(max(need, int(wanted.get(MAX_MESSAGE_BYTES, need))))
            create.append(TopicCreate(name, src.partitions, wanted))
            limits[name] = (int(wanted[MAX_MESSAGE_BYTES]) if MAX_MESSAGE_BYTES in wanted else need,
                            src.max_message_bytes)
            warnings += _warnings(name, wanted, wanted.get(TIMESTAMP_TYPE))
            if owned is not None and owner is not None and owner != owned.target:
                records[name] = record(owner, wanted)
            continue
        if tgt.partitions > src.partitions:
            conflicts[name] = PartitionCountConflict(tgt.cluster or target_cluster, name, tgt.partitions,
                                                     src.partitions, src.cluster or source_cluster)
        elif tgt.partitions < src.partitions:
            add.append(PartitionAdd(name, tgt.partitions, src.partitions))

        if owned is not None and owner == owned.target:
            limits[name] = (tgt.max_message_bytes, src.max_message_bytes)  # the owner: compared with nobody
            warnings += _warnings(name, travelling(tgt.configs), tgt.timestamp_type)
            continue
        if owned is not None and owner is not None and owner_shape is not None:
            have = {k: v for k, v in travelling(tgt.configs).items() if k not in owned.ownership.exclude}
            verdict = decide(name, owner, owned.target, wanted, have,
                             (owned.records or {}).get(name), owned.ownership.on_local_change, _same,
                             defaults=tgt.defaults, allow_keeping_less=owned.ownership.allow_keeping_less)
            drift += [ConfigDrift(name, k.key, k.owner_value, k.target_value, owner) for k in verdict.keys]
            effective = {**have, **verdict.to_set}
            for key in verdict.to_delete:
                effective.pop(key, None)
            limit = int(effective[MAX_MESSAGE_BYTES]) if MAX_MESSAGE_BYTES in effective else tgt.max_message_bytes
            if not verdict.keys and owned.records is not None and verdict.record_changed:
                records[name] = verdict.record()  # a baseline: the next difference is told apart by it
            if verdict.keys:
                verdicts.append(verdict)
                if (verdict.to_set or verdict.to_delete) and name not in conflicts:
                    align.append(ConfigAlign(name, verdict.to_set, verdict.to_delete))
            limits[name] = (limit, src.max_message_bytes)
            stamped = effective.get(TIMESTAMP_TYPE) or (None if TIMESTAMP_TYPE in have else tgt.timestamp_type)
            warnings += _warnings(name, effective, stamped)
            continue

        have = travelling(tgt.configs)
        if owned is not None:
            have = {k: v for k, v in have.items() if k not in owned.ownership.exclude}
        wanted.pop(MAX_MESSAGE_BYTES, None)
        limit = tgt.max_message_bytes
        if (need is not None and (tgt.max_message_bytes or 0) < need
                and (MAX_MESSAGE_BYTES in src.configs or MAX_MESSAGE_BYTES in have)):
            # too small for copies of what the source accepts; limits both left to their brokers' defaults
            # are not compared (the same default: a copy of a record at exactly that size fails by name)
            wanted[MAX_MESSAGE_BYTES] = str(need)
        elif MAX_MESSAGE_BYTES in have:
            wanted[MAX_MESSAGE_BYTES] = have[MAX_MESSAGE_BYTES]  # large enough: never lowered, never drift
        differs = [k for k in sorted(set(wanted) | set(have)) if not _same(k, wanted.get(k), have.get(k))]
        drift += [ConfigDrift(name, k, wanted.get(k), have.get(k)) for k in differs]
        effective = dict(have)
        if differs and align_configs and name not in conflicts:
            to_set = {k: wanted[k] for k in differs if k in wanted}
            to_delete = tuple(k for k in differs if k not in wanted)
            align.append(ConfigAlign(name, to_set, to_delete))
            effective = dict(wanted)
            if MAX_MESSAGE_BYTES in to_set:
                limit = int(to_set[MAX_MESSAGE_BYTES])
        limits[name] = (limit, src.max_message_bytes)
        if TIMESTAMP_TYPE in effective:
            timestamp_type: str | None = effective[TIMESTAMP_TYPE]
        elif TIMESTAMP_TYPE in have:
            timestamp_type = None  # removed by the alignment: the target's broker default applies, unknown here
        else:
            timestamp_type = tgt.timestamp_type or have.get(TIMESTAMP_TYPE)
        warnings += _warnings(name, effective, timestamp_type)

    deleted = tuple(sorted(n for n in target if n not in source))
    return ShapePlan(source_cluster, target_cluster, tuple(create), tuple(add), tuple(align), conflicts,
                     tuple(drift), deleted, tuple(warnings), limits, tuple(verdicts), records)


def _owner_values(owner: TopicShape, ownership: ConfigOwnership) -> dict[str, str]:
    """The owner's travelling configs a follower should have: excluded keys left out, and a
    ``max.message.bytes`` with room for the stamp headers (:func:`with_headroom`) of whatever the owner's
    effective limit is, so that copies of any record the owner accepts fit on the follower."""
    values = {k: v for k, v in travelling(owner.configs).items() if k not in ownership.exclude}
    values.pop(MAX_MESSAGE_BYTES, None)
    if owner.max_message_bytes is not None and MAX_MESSAGE_BYTES not in ownership.exclude:
        values[MAX_MESSAGE_BYTES] = str(with_headroom(owner.max_message_bytes))
    return values

