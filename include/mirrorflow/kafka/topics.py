"""Topics as a cluster holds them: described (partitions, travelling configs, what they inherit), created, grown.

:func:`describe_topics` reads the shapes (:class:`~mirrorflow.kafka.shapes.TopicShape`)
of topics on one cluster; :func:`broker_defaults` and :func:`inherited` say what a
topic keeps when it sets nothing; :func:`await_partitions` waits for metadata to
show a topic's partitions after it was created or grown, and :func:`topic_failure`
names one topic's failed admin call. :func:`create_topics`, :func:`create_partitions`
and :func:`alter_topic_configs` send the requests, cut to what a controller accepts,
and hand back each topic's future. Keeping a target in the shape of its source is
:mod:`mirrorflow.cluster_sync` (``plan_shape``, ``apply_shape``); see docs/topics.md.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

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

from mirrorflow.errors import ClusterUnreachable, KafkaOperationError, MirrorflowError
from mirrorflow.kafka.codes import UNREACHABLE_CODES
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.refusals import Need, call_failed
from mirrorflow.kafka.shapes import KEEPING_CONFIGS, MAX_MESSAGE_BYTES, TIMESTAMP_TYPE, TRAVELLING_CONFIGS, TopicShape
from mirrorflow.kafka.shared import admin_for

_log = logging.getLogger(__name__)

_pause = threading.Event()  # never set: .wait(t) paces metadata polls


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


def topic_failure(client: ClusterClient, operation: str, exc: BaseException, *needs: Need) -> KafkaOperationError:
    """One topic's failure while applying: always a KafkaOperationError naming cluster, topic and operation."""
    if isinstance(exc, KafkaException) and exc.args:
        return call_failed(client, operation, exc.args[0], *needs)
    if isinstance(exc, concurrent.futures.TimeoutError):
        return KafkaOperationError(client.name, operation, "no answer from the cluster in time")
    return KafkaOperationError(client.name, operation, f"{type(exc).__name__}: {exc}")


def error_code(exc: BaseException) -> Any:
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
            if error_code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise _failure(client, f"describe topic {name}", exc, Need("TOPIC", name, "DESCRIBE")) from exc

    shapes: dict[str, TopicShape] = {}
    for resource, future in config_futures.items():
        name = resource.name
        try:
            entries: Mapping[str, ConfigEntry] = future.result(timeout=timeout + 5)
        except Exception as exc:
            if error_code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART:
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


def describe_logical(client: ClusterClient, topics: Iterable[str], timeout: float = 30.0,
                     config_need: str = "DESCRIBE_CONFIGS") -> dict[str, TopicShape]:
    """:func:`describe_topics` for logical names: asked under the cluster's names, keyed by the logical ones."""
    wanted = {client.physical(t): t for t in topics}
    found = describe_topics(client, wanted, timeout, config_need)
    return {wanted[name]: shape for name, shape in found.items()}


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


def await_partitions(admin_client: AdminClient, topic: str, wanted: int, timeout: float) -> int | None:
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


# --------------------------------------------------------------------------- create, grow, alter


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


def create_topics(client: ClusterClient, admin_client: AdminClient,
                  topics: Sequence[tuple[str, int, Mapping[str, str]]], replication_factor: int,
                  timeout: float) -> tuple[dict[str, Any], dict[str, KafkaOperationError]]:
    """Ask for ``(name, partitions, configs)`` topics, in requests a controller accepts (``-1``: the
    cluster's default replication factor). Each topic's future, and the failure of each topic whose
    request was refused as a whole; what a future says is the caller's to judge."""
    new = [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=dict(configs))
           for name, partitions, configs in topics]
    futures: dict[str, Any] = {}
    failed: dict[str, KafkaOperationError] = {}
    for batch in batches(new, lambda t: t.num_partitions, PARTITIONS_PER_REQUEST):
        try:
            futures.update(admin_client.create_topics(batch, operation_timeout=timeout, request_timeout=timeout))
        except KafkaException as exc:
            for t in batch:
                failed[t.topic] = topic_failure(client, f"create topic {t.topic}", exc,
                                                Need("TOPIC", t.topic, "CREATE"))
    return futures, failed


def create_partitions(client: ClusterClient, admin_client: AdminClient, grow: Sequence[tuple[str, int, int]],
                      timeout: float) -> tuple[dict[str, Any], dict[str, KafkaOperationError]]:
    """Ask for ``(name, current, wanted)`` topics to grow to ``wanted`` partitions, in requests a controller
    accepts. Each topic's future, and the failure of each topic whose request was refused as a whole."""
    futures: dict[str, Any] = {}
    failed: dict[str, KafkaOperationError] = {}
    for batch in batches(list(grow), lambda g: g[2] - g[1], PARTITIONS_PER_REQUEST):
        try:
            futures.update(admin_client.create_partitions([NewPartitions(name, wanted) for name, _, wanted in batch],
                                                          operation_timeout=timeout, request_timeout=timeout))
        except KafkaException as exc:
            for name, _, _ in batch:
                failed[name] = topic_failure(client, f"add partitions to {name}", exc, Need("TOPIC", name, "ALTER"))
    return futures, failed


def alter_topic_configs(client: ClusterClient, admin_client: AdminClient,
                        changes: Mapping[str, tuple[Mapping[str, str], Sequence[str]]],
                        timeout: float) -> tuple[dict[str, Any], dict[str, KafkaOperationError]]:
    """Ask for each topic's ``(set, delete)`` config changes, incrementally: keys named nowhere stay as they
    are. Each topic's future, or each topic's failure when the request was refused as a whole."""
    resources = [
        ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            *(ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(to_set.items())),
            *(ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete),
        ])
        for topic, (to_set, to_delete) in changes.items()
    ]
    try:
        by_resource = admin_client.incremental_alter_configs(resources, request_timeout=timeout)
    except KafkaException as exc:
        return {}, {topic: topic_failure(client, f"align configs of {topic}", exc,
                                         Need("TOPIC", topic, "ALTER_CONFIGS")) for topic in changes}
    return {r.name: f for r, f in by_resource.items()}, {}
