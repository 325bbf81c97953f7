"""Keep target topics in the shape of their source: partition count and the configs that travel.

A mirrored topic is copied partition-for-partition (source partition *p* lands in
target partition *p*, which keeps per-key order and makes offsets comparable), so
the target must have exactly the source's partition count. Some topic configs
describe the *data* (how long it is kept, how it is compacted, how big a record
may be) and travel with the topic; others describe how one cluster stores and
protects it (replication, ISR, throttles, placement, tiered storage, flushing) and
stay with each cluster. See docs/topics.md.

Three steps, so the middle one is a pure function that tests and dry runs can use:

- :func:`describe_topics` reads partition counts and the explicitly set, travelling
  configs of topics on one cluster;
- :func:`plan_shape` compares source and target shapes: topics to create, partitions
  to add, partition-count conflicts, config drift, topics gone from the source;
- :func:`apply_shape` carries the plan out on the target, topic by topic: one failing
  topic never stops the others, and a concurrent run doing the same is harmless.

:func:`sync_topic_shapes` chains them for the topics a topology selects. With the
owners' side (:mod:`mirrorflow.kafka.config_sync`), the travelling configs follow each
topic's config owner instead of the link's source (:mod:`mirrorflow.kafka.ownership`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from mirrorflow.declined import Declined
from mirrorflow.errors import ClusterUnreachable, KafkaOperationError, MirrorflowError
from mirrorflow.internal_names import is_internal_topic
from mirrorflow.journal import audit
from mirrorflow.kafka.admin import list_topics
from mirrorflow.kafka.codes import UNREACHABLE_CODES
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.ownership import (
    KEEPING_CONFIGS,
    TRAVELLING_CONFIGS,
    ConfigOwnership,
    TopicVerdict,
    decide,
    record,
)
from mirrorflow.kafka.refusals import Need, call_failed
from mirrorflow.kafka.shared import admin_for

_log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = "max.message.bytes"
#: A copy is larger than its original by the two headers mirrorflow stamps on it (copy flags and
#: origin, a few hundred bytes at most), so a record at exactly its topic's limit fits only a copy
#: topic with room for them. :func:`with_headroom` gives that room in a form it recognises again.
HEADROOM_GRID = 4096
HEADROOM_MARK = 1111

TIMESTAMP_TYPE = "message.timestamp.type"
LOG_APPEND_TIME = "LogAppendTime"
BEFORE_MAX_MS = "message.timestamp.before.max.ms"
_NO_LIMIT = str(2**63 - 1)

_pause = threading.Event()  # never set: .wait(t) paces metadata polls


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


# --------------------------------------------------------------------------- shapes and plans


@dataclass(frozen=True)
class TopicShape:
    """What must match between a topic and its copies.

    ``configs`` holds only travelling configs (:data:`TRAVELLING_CONFIGS`) that were set
    explicitly on the topic (source ``DYNAMIC_TOPIC_CONFIG``); broker defaults are left
    out, since each cluster keeps its own. ``timestamp_type`` is the *effective*
    ``message.timestamp.type`` whatever set it (a broker default of ``LogAppendTime``
    matters to a mirror even though it does not travel). ``cluster`` says where the
    shape was read, for error messages.
    """

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    cluster: str = ""
    timestamp_type: str | None = None
    #: The effective ``max.message.bytes``, whatever set it (``None``: not known).
    max_message_bytes: int | None = None
    #: For each key of :data:`~mirrorflow.kafka.ownership.KEEPING_CONFIGS`: the value it takes here when the
    #: topic does not set it (the broker's), in the topic config's unit; ``None``: not known.
    defaults: dict[str, str | None] = field(default_factory=dict, compare=False)


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
    """The owners' side of a plan (:mod:`mirrorflow.kafka.ownership`).

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


@dataclass(frozen=True)
class ShapeResult:
    """What :func:`apply_shape` did.

    ``already_done`` lists steps a concurrent run had already carried out (a topic
    created or grown by someone else with the planned partition count): successes,
    without an audit line since this run changed nothing. ``failed`` holds create and
    partition failures, ``align_failed`` config failures; both per topic.
    """

    plan: ShapePlan
    created: tuple[TopicCreate, ...] = ()
    partitions_added: tuple[PartitionAdd, ...] = ()
    aligned: tuple[ConfigAlign, ...] = ()
    already_done: tuple[str, ...] = ()
    failed: dict[str, MirrorflowError] = field(default_factory=dict)
    align_failed: dict[str, MirrorflowError] = field(default_factory=dict)

    @property
    def conflicts(self) -> dict[str, PartitionCountConflict]:
        return self.plan.conflicts

    @property
    def blocked(self) -> dict[str, MirrorflowError]:
        """Topics whose copy must not run this time: shape conflicts and failed creates or partition adds.

        (A conflict found only while applying, a concurrent creator having made the topic
        with more partitions, is in ``failed``.)

        A config that could not be aligned does not block the copy (the data still
        lands partition-for-partition), it is reported in ``align_failed``.
        """
        return {**self.plan.conflicts, **self.failed}

    @property
    def ok(self) -> bool:
        return not (self.blocked or self.align_failed)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.partitions_added or self.aligned)


# --------------------------------------------------------------------------- describe


def _failure(client: ClusterClient, operation: str, exc: BaseException, *needs: Need) -> MirrorflowError:
    """A KafkaException or a future timeout as the mirrorflow error an operator can act on."""
    if isinstance(exc, KafkaException):
        err = exc.args[0] if exc.args else exc
        code = err.code() if isinstance(err, KafkaError) else None
        if code in UNREACHABLE_CODES:
            return ClusterUnreachable(client.name, client.bootstrap, f"{operation}: {err}")
        return call_failed(client, operation, err, *needs)
    if isinstance(exc, concurrent.futures.TimeoutError):
        return ClusterUnreachable(client.name, client.bootstrap, f"{operation}: no answer in time")
    return KafkaOperationError(client.name, operation, f"{type(exc).__name__}: {exc}")


def _topic_failure(client: ClusterClient, operation: str, exc: BaseException, *needs: Need) -> KafkaOperationError:
    """One topic's failure while applying: always a KafkaOperationError naming cluster, topic and operation."""
    if isinstance(exc, KafkaException) and exc.args:
        return call_failed(client, operation, exc.args[0], *needs)
    if isinstance(exc, concurrent.futures.TimeoutError):
        return KafkaOperationError(client.name, operation, "no answer from the cluster in time")
    return KafkaOperationError(client.name, operation, f"{type(exc).__name__}: {exc}")


def _code(exc: BaseException) -> Any:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].code()
    return None


def describe_topics(client: ClusterClient, names: Iterable[str], timeout: float = 30.0,
                    config_need: str = "DESCRIBE_CONFIGS") -> dict[str, TopicShape]:
    """The shapes of the named topics that exist on the cluster (absent names are left out).

    Raises :class:`ClusterUnreachable` or :class:`KafkaOperationError` (naming the
    cluster and the topic) for anything but "unknown topic". ``config_need``: the
    operation a refused config read names, ``ALTER_CONFIGS`` where the configs are
    read to be aligned (it implies ``DESCRIBE_CONFIGS``, and is the ACL granted there).
    """
    names = sorted(set(names))
    if not names:
        return {}
    admin_client = admin_for(client)  # keep a reference: a collected client cancels its futures
    try:
        topic_futures = admin_client.describe_topics(TopicCollection(names), request_timeout=timeout)
        config_futures = admin_client.describe_configs(
            [ConfigResource(ResourceType.TOPIC, n) for n in names], request_timeout=timeout)
    except KafkaException as exc:
        raise _failure(client, "describe topics", exc) from exc

    partitions: dict[str, int] = {}
    for name, future in topic_futures.items():
        try:
            partitions[name] = len(future.result(timeout=timeout + 5).partitions)
        except Exception as exc:
            if _code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise _failure(client, f"describe topic {name}", exc, Need("TOPIC", name, "DESCRIBE")) from exc

    shapes: dict[str, TopicShape] = {}
    for resource, future in config_futures.items():
        name = resource.name
        try:
            entries: Mapping[str, ConfigEntry] = future.result(timeout=timeout + 5)
        except Exception as exc:
            if _code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise _failure(client, f"describe configs of topic {name}", exc,
                           Need("TOPIC", name, config_need)) from exc
        if name not in partitions:  # deleted between the two calls
            continue
        explicit = {
            key: entry.value
            for key, entry in entries.items()
            if key in TRAVELLING_CONFIGS and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
            and entry.value is not None
        }
        ts = entries.get(TIMESTAMP_TYPE)
        limit = entries.get(MAX_MESSAGE_BYTES)
        shapes[name] = TopicShape(name, partitions[name], explicit, client.name, ts.value if ts is not None else None,
                                  int(limit.value) if limit is not None and limit.value is not None else None,
                                  {key: inherited(entries.get(key)) for key in KEEPING_CONFIGS})
    if any(v is None for shape in shapes.values() for v in shape.defaults.values()):
        broker = broker_defaults(admin_client, timeout)  # behind a topic's own value: asked once, only then
        shapes = {n: replace(sh, defaults={k: v if v is not None else broker.get(k) for k, v in sh.defaults.items()})
                  for n, sh in shapes.items()}
    return shapes


def broker_defaults(admin_client: AdminClient, timeout: float) -> dict[str, str | None]:
    """What a topic that sets none of :data:`KEEPING_CONFIGS` keeps on this cluster: its brokers' ``log.*``.

    A topic's own value hides the broker's (Kafka lists no default among its
    synonyms), so the broker's configs are read. Nothing (``{}``) when they cannot
    be (no ``DESCRIBE_CONFIGS`` on the cluster): the caller then cannot compare, and
    doubts.
    """
    try:
        broker = min(admin_client.list_topics(timeout=timeout).brokers)
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        entries = admin_client.describe_configs([resource], request_timeout=timeout)[resource].result(timeout + 5)
    except (KafkaException, ValueError, concurrent.futures.TimeoutError) as exc:
        _log.info("cannot read the brokers' retention defaults (%s): a follower's own retention is compared with "
                  "an unknown default, and kept", exc)
        return {}

    def value(key: str) -> str | None:
        entry = entries.get(key)
        return entry.value if entry is not None else None

    retention = value("log.retention.ms")
    for key, factor in (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)):
        if retention is None and value(key) is not None:
            retention = str(int(value(key) or 0) * factor)
    return {"retention.ms": retention, "retention.bytes": value("log.retention.bytes"),
            "cleanup.policy": value("log.cleanup.policy")}


#: Broker settings behind a topic config, by the factor that turns their unit into the topic config's.
_UNITS = {".hours": 3_600_000, ".minutes": 60_000}


def inherited(entry: ConfigEntry | None) -> str | None:
    """The value a topic config takes when the topic does not set it: the next source in its synonyms.

    A key the topic does not set reports its effective value directly; one it sets
    lists the broker's settings behind it as synonyms, which may be in hours or
    minutes (``log.retention.hours``). ``None`` when it cannot be told.
    """
    if entry is None:
        return None
    if entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value:
        return entry.value
    for synonym in (entry.synonyms or {}).values():
        if synonym.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value or synonym.value is None:
            continue
        factor = next((f for suffix, f in _UNITS.items() if synonym.name.endswith(suffix)), 1)
        try:
            return synonym.value if factor == 1 else str(int(synonym.value) * factor)
        except ValueError:
            return None
    return None


# --------------------------------------------------------------------------- plan (pure)


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
    source (:mod:`mirrorflow.kafka.ownership`): a new topic is created with the owner's
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


# --------------------------------------------------------------------------- apply


def _await_partitions(admin_client: AdminClient, topic: str, wanted: int, timeout: float) -> int | None:
    """Poll metadata until ``topic`` shows ``wanted`` partitions, each led; return the last count seen.

    Creation and growth futures resolve when the controller has committed the change;
    brokers learn of it a moment later. Returning only once metadata agrees means the
    copy job that follows finds every partition.
    """
    deadline = time.monotonic() + timeout
    seen: int | None = None
    while True:
        try:
            md = admin_client.list_topics(timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            tm = md.topics.get(topic)
            if tm is not None and tm.error is None:
                seen = len(tm.partitions)
                if seen == wanted and all(p.leader >= 0 and p.error is None for p in tm.partitions.values()):
                    return seen
                if seen > wanted:
                    return seen
        except KafkaException:
            pass
        if time.monotonic() >= deadline:
            return seen
        _pause.wait(0.05)


#: Partitions created (or added) per admin request. A KRaft controller refuses one request
#: that would write more than 10,000 records ("excessively large batch operation", found by
#: the planning benchmark at 10,000 partitions), which failed every topic of the request.
PARTITIONS_PER_REQUEST = 5000


def batches(items: list, size: Any, limit: int) -> list[list]:
    """``items`` in order, cut into lists whose ``size(item)`` sums stay within ``limit``.

    An item bigger than ``limit`` on its own gets a list of its own (the broker then
    judges it, and its failure names only that topic).
    """
    out: list[list] = []
    total = 0
    for item in items:
        n = size(item)
        if out and total + n <= limit:
            out[-1].append(item)
            total += n
        else:
            out.append([item])
            total = n
    return out


def apply_shape(target_client: ClusterClient, plan: ShapePlan, replication_factor: int | None = None,
                timeout: float = 30.0) -> ShapeResult:
    """Carry out ``plan`` on the target cluster; never raises for one topic's failure.

    Topics are created with the target's ``default.replication.factor`` unless
    ``replication_factor`` is given (replication belongs to each cluster). Every
    failure is collected per topic as a :class:`KafkaOperationError` naming the
    target cluster, the topic and the operation. Two runs applying the same plan at
    once both succeed: ``TOPIC_ALREADY_EXISTS`` (or "already has N partitions") counts
    as done when the topic has the planned partition count. One audit line per change.
    """
    cluster = target_client.name
    admin_client = admin_for(target_client)  # keep a reference: a collected client cancels its futures
    created: list[TopicCreate] = []
    added: list[PartitionAdd] = []
    aligned: list[ConfigAlign] = []
    already: list[str] = []
    failed: dict[str, MirrorflowError] = {}
    align_failed: dict[str, MirrorflowError] = {}
    source = {"source": plan.source_cluster} if plan.source_cluster else {}

    for warning in plan.warnings:
        _log.warning("cluster %s: %s", cluster, warning.message)
    for conflict in plan.conflicts.values():
        _log.error("%s", conflict)
    for topic in plan.deleted_on_source:
        _log.warning("cluster %s: topic %s is gone from the source %s; left in place on the target",
                     cluster, topic, plan.source_cluster or "")

    # -- create
    grow_after_race: list[PartitionAdd] = []
    if plan.create:
        rf = -1 if replication_factor is None else replication_factor
        new = [NewTopic(c.topic, num_partitions=c.partitions, replication_factor=rf, config=dict(c.configs))
               for c in plan.create]
        futures = {}
        for batch in batches(new, lambda t: t.num_partitions, PARTITIONS_PER_REQUEST):
            try:
                futures.update(admin_client.create_topics(batch, operation_timeout=timeout, request_timeout=timeout))
            except KafkaException as exc:
                for t in batch:
                    failed[t.topic] = _topic_failure(target_client, f"create topic {t.topic}", exc,
                                                     Need("TOPIC", t.topic, "CREATE"))
        for c in plan.create:
            if c.topic not in futures:
                continue
            operation = f"create topic {c.topic}"
            try:
                futures[c.topic].result(timeout=timeout + 5)
            except Exception as exc:
                if _code(exc) != KafkaError.TOPIC_ALREADY_EXISTS:
                    failed[c.topic] = _topic_failure(target_client, operation, exc, Need("TOPIC", c.topic, "CREATE"))
                    continue
                # Someone else (a concurrent run) created it: fine if it has, or can get, our shape.
                seen = _await_partitions(admin_client, c.topic, c.partitions, timeout)
                if seen == c.partitions:
                    already.append(c.topic)
                elif seen is not None and seen < c.partitions:
                    grow_after_race.append(PartitionAdd(c.topic, seen, c.partitions))
                elif seen is not None:
                    failed[c.topic] = PartitionCountConflict(cluster, c.topic, seen, c.partitions, plan.source_cluster)
                else:
                    failed[c.topic] = KafkaOperationError(
                        cluster, operation, f"topic already exists but is not listed in metadata within {timeout:.0f}s")
                continue
            seen = _await_partitions(admin_client, c.topic, c.partitions, timeout)
            if seen != c.partitions:
                failed[c.topic] = KafkaOperationError(
                    cluster, operation, f"created, but metadata shows {seen} of {c.partitions} partitions "
                                        f"ready after {timeout:.0f}s")
            created.append(c)
            audit("topic_create", cluster=cluster, topic=c.topic, partitions=c.partitions, configs=dict(c.configs),
                  replication_factor=replication_factor if replication_factor is not None else "default", **source)

    # -- add partitions
    adds = [a for a in (*plan.add_partitions, *grow_after_race) if a.topic not in failed]
    if adds:
        futures = {}
        for batch in batches(adds, lambda a: a.wanted - a.current, PARTITIONS_PER_REQUEST):
            try:
                futures.update(admin_client.create_partitions([NewPartitions(a.topic, a.wanted) for a in batch],
                                                              operation_timeout=timeout, request_timeout=timeout))
            except KafkaException as exc:
                for a in batch:
                    failed[a.topic] = _topic_failure(target_client, f"add partitions to {a.topic}", exc,
                                                     Need("TOPIC", a.topic, "ALTER"))
        for a in adds:
            if a.topic not in futures:
                continue
            operation = f"add partitions to {a.topic} ({a.current} -> {a.wanted})"
            try:
                futures[a.topic].result(timeout=timeout + 5)
            except Exception as exc:
                if _code(exc) == KafkaError.INVALID_PARTITIONS:
                    # "Topic already has N partition(s)": a concurrent run grew it first. The
                    # controller says so before the brokers' metadata shows it: wait for that.
                    if _await_partitions(admin_client, a.topic, a.wanted, timeout) == a.wanted:
                        already.append(a.topic)
                        continue
                failed[a.topic] = _topic_failure(target_client, operation, exc, Need("TOPIC", a.topic, "ALTER"))
                continue
            seen = _await_partitions(admin_client, a.topic, a.wanted, timeout)
            if seen != a.wanted:
                failed[a.topic] = KafkaOperationError(
                    cluster, operation, f"metadata shows {seen} of {a.wanted} partitions after {timeout:.0f}s")
            added.append(a)
            audit("topic_partitions_add", cluster=cluster, topic=a.topic, partitions_before=a.current,
                  partitions=a.wanted, **source)

    # -- keys a follower keeps: audited when new, a report_only one logged every run
    verdicts = {v.topic: v for v in plan.verdicts}
    for verdict in plan.verdicts:
        fresh = {k.key for k in verdict.newly_local}
        for k in verdict.keys:
            if k.applies:
                continue
            message = k.explain(verdict.topic, verdict.owner, cluster)
            if k.action in ("report", "decline"):  # every run: it is still not done
                _log.warning("cluster %s: %s", cluster, message)
            elif k.key in fresh:
                _log.info("cluster %s: %s", cluster, message)
            if k.key in fresh:
                kind = {"keep": "topic_config_kept", "decline": "topic_config_declined"}.get(k.action,
                                                                                            "topic_config_drift")
                audit(kind, cluster=cluster, topic=verdict.topic, owner=verdict.owner, key=k.key,
                      value=k.target_value, owner_value=k.owner_value, why=k.why)

    # -- align configs (incremental: only the travelling keys are touched, cluster-owned ones stay)
    if plan.align:
        resources = {
            al.topic: ConfigResource(ResourceType.TOPIC, al.topic, incremental_configs=[
                *(ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(al.set.items())),
                *(ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in al.delete),
            ])
            for al in plan.align
        }
        try:
            by_resource = admin_client.incremental_alter_configs(list(resources.values()), request_timeout=timeout)
            futures = {r.name: f for r, f in by_resource.items()}
        except KafkaException as exc:
            futures = {}
            for al in plan.align:
                align_failed[al.topic] = _topic_failure(target_client, f"align configs of {al.topic}", exc,
                                                               Need("TOPIC", al.topic, "ALTER_CONFIGS"))
        for al in plan.align:
            if al.topic not in futures:
                continue
            try:
                futures[al.topic].result(timeout=timeout + 5)
            except Exception as exc:
                align_failed[al.topic] = _topic_failure(target_client, f"align configs of {al.topic}", exc,
                                                               Need("TOPIC", al.topic, "ALTER_CONFIGS"))
                continue
            aligned.append(al)
            owned = verdicts.get(al.topic)
            if owned is None:
                audit("topic_config_align", cluster=cluster, topic=al.topic, set=dict(al.set),
                      removed=list(al.delete), **source)
            else:
                audit("topic_config_align", cluster=cluster, topic=al.topic, owner=owned.owner,
                      set=dict(al.set), removed=list(al.delete), **source,
                      changes=[{"key": k.key, "old": k.target_value, "new": k.owner_value, "why": k.why}
                               for k in owned.keys if k.applies])
                for k in owned.keys:
                    if k.applies:
                        _log.info("cluster %s: %s", cluster, k.explain(al.topic, owned.owner, cluster))

    for topic, error in {**failed, **align_failed}.items():
        _log.error("%s", error)
    return ShapeResult(plan, tuple(created), tuple(added), tuple(aligned), tuple(already), failed, align_failed)


# --------------------------------------------------------------------------- convenience


class OwnerSide(Protocol):
    """What :func:`sync_topic_shapes` needs of the owners (:class:`mirrorflow.kafka.config_sync.ConfigOwners`)."""

    ownership: ConfigOwnership

    def owned(self, target: str, topics: Iterable[str],
              records: Mapping[str, Any] | None = None) -> OwnedConfigs: ...

    def records(self, client: ClusterClient) -> dict[str, dict[str, Any]] | None: ...

    def remember(self, client: ClusterClient, records: Mapping[str, Mapping[str, Any]]) -> None: ...


def sync_topic_shapes(source_client: ClusterClient, target_client: ClusterClient, topology: Any,
                      align_configs: bool = False, replication_factor: int | None = None,
                      timeout: float = 30.0, owners: OwnerSide | None = None) -> ShapeResult:
    """Bring the target's copies of every topic the topology selects into the source's shape.

    ``topology`` needs only ``selects(topic)`` (a :class:`~mirrorflow.topology.Topology`);
    internal topics are never selected. Target topics that the topology selects but
    the source no longer has are reported as ``deleted_on_source``. With ``owners``,
    the configs follow each topic's owner (:func:`plan_shape`): the target's records of
    what the sync last saw are read every run, and written when they change.
    """
    def selected(client: ClusterClient) -> list[str]:
        return [t for t in list_topics(client, timeout) if topology.selects(t) and not is_internal_topic(t)]

    selected_source, selected_target = selected(source_client), selected(target_client)
    source_shapes = describe_topics(source_client, selected_source, timeout)
    target_shapes = describe_topics(target_client, set(selected_source) | set(selected_target), timeout,
                                    "ALTER_CONFIGS" if owners is not None or align_configs else "DESCRIBE_CONFIGS")
    owned = None
    if owners is not None:
        # The record decides whose value a follower holds (ownership.decide), under every policy: without it
        # an owner's change and the follower's own value look alike, and the follower's longer retention
        # would go. Read every run (one compacted partition) and written only when it changes.
        owned = replace(owners.owned(target_client.name, selected_source), records=owners.records(target_client))
    plan = plan_shape(source_shapes, target_shapes, align_configs=align_configs, owned=owned)
    plan = replace(plan, source_cluster=source_client.name, target_cluster=target_client.name)
    result = apply_shape(target_client, plan, replication_factor=replication_factor, timeout=timeout)
    if owners is not None and owned is not None:
        created = {c.topic for c in result.created}
        remember = {t: r for t, r in plan.records.items() if t in created or t in target_shapes}
        if owned.records is not None:  # records that could not be read are not written over with a first look
            remember.update({v.topic: v.record() for v in plan.verdicts if v.record_changed
                             and v.topic not in result.align_failed and v.topic not in result.blocked})
        else:
            remember = {t: r for t, r in remember.items() if t in created}
        if remember:
            owners.remember(target_client, remember)
    return result
