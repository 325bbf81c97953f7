"""Keep target topics in the shape of their source: a plan carried out on the target, and the whole sync.

:func:`apply_shape` carries a :class:`~mirrorflow.cluster_sync.shape_plan.ShapePlan`
out on the target, topic by topic: one failing topic never stops the others, and a
concurrent run doing the same is harmless. :func:`sync_topic_shapes` chains the
three steps for the topics a topology selects: describe both sides
(:func:`mirrorflow.kafka.describe_topics`), plan (:func:`~mirrorflow.cluster_sync.plan_shape`),
apply. With the owners' side (:mod:`~mirrorflow.cluster_sync.config_sync`), the
travelling configs follow each topic's config owner instead of the link's source.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from confluent_kafka import KafkaError

from mirrorflow.cluster_sync.ownership import ConfigOwnership
from mirrorflow.cluster_sync.shape_plan import (
    ConfigAlign,
    OwnedConfigs,
    PartitionAdd,
    PartitionCountConflict,
    ShapePlan,
    TopicCreate,
    plan_shape,
)
from mirrorflow.errors import KafkaOperationError, MirrorflowError
from mirrorflow.internal_names import is_internal_topic
from mirrorflow.journal import journal_entry
from mirrorflow.kafka import (
    ClusterClient,
    Need,
    admin_for,
    alter_topic_configs,
    await_partitions,
    create_partitions,
    create_topics,
    describe_logical,
    error_code,
    list_topics,
    topic_failure,
)

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShapeResult:
    """What :func:`apply_shape` did.

    ``already_done`` lists steps a concurrent run had already carried out (a topic
    created or grown by someone else with the planned partition count): successes,
    without a journal line since this run changed nothing. ``failed`` holds create and
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


# --------------------------------------------------------------------------- apply


def apply_shape(target_client: ClusterClient, plan: ShapePlan, replication_factor: int | None = None,
                timeout: float = 30.0) -> ShapeResult:
    """Carry out ``plan`` on the target cluster; never raises for one topic's failure.

    Topics are created with the target's ``default.replication.factor`` unless
    ``replication_factor`` is given (replication belongs to each cluster). Every
    failure is collected per topic as a :class:`KafkaOperationError` naming the
    target cluster, the topic and the operation. Two runs applying the same plan at
    once both succeed: ``TOPIC_ALREADY_EXISTS`` (or "already has N partitions") counts
    as done when the topic has the planned partition count. One journal line per change.
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
        futures, refused = create_topics(target_client, admin_client,
                                         [(c.topic, c.partitions, c.configs) for c in plan.create], rf, timeout)
        failed.update(refused)
        for c in plan.create:
            if c.topic not in futures:
                continue
            operation = f"create topic {c.topic}"
            try:
                futures[c.topic].result(timeout=timeout + 5)
            except Exception as exc:
                if error_code(exc) != KafkaError.TOPIC_ALREADY_EXISTS:
                    failed[c.topic] = topic_failure(target_client, operation, exc, Need("TOPIC", c.topic, "CREATE"))
                    continue
                # Someone else (a concurrent run) created it: fine if it has, or can get, our shape.
                seen = await_partitions(admin_client, c.topic, c.partitions, timeout)
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
            seen = await_partitions(admin_client, c.topic, c.partitions, timeout)
            if seen != c.partitions:
                failed[c.topic] = KafkaOperationError(
                    cluster, operation, f"created, but metadata shows {seen} of {c.partitions} partitions "
                                        f"ready after {timeout:.0f}s")
            created.append(c)
            journal_entry("topic_create", cluster=cluster, topic=c.topic, partitions=c.partitions,
                          configs=dict(c.configs),
                          replication_factor=replication_factor if replication_factor is not None else "default",
                          **source)

    # -- add partitions
    adds = [a for a in (*plan.add_partitions, *grow_after_race) if a.topic not in failed]
    if adds:
        futures, refused = create_partitions(target_client, admin_client,
                                             [(a.topic, a.current, a.wanted) for a in adds], timeout)
        failed.update(refused)
        for a in adds:
            if a.topic not in futures:
                continue
            operation = f"add partitions to {a.topic} ({a.current} -> {a.wanted})"
            try:
                futures[a.topic].result(timeout=timeout + 5)
            except Exception as exc:
                if error_code(exc) == KafkaError.INVALID_PARTITIONS:
                    # "Topic already has N partition(s)": a concurrent run grew it first. The
                    # controller says so before the brokers' metadata shows it: wait for that.
                    if await_partitions(admin_client, a.topic, a.wanted, timeout) == a.wanted:
                        already.append(a.topic)
                        continue
                failed[a.topic] = topic_failure(target_client, operation, exc, Need("TOPIC", a.topic, "ALTER"))
                continue
            seen = await_partitions(admin_client, a.topic, a.wanted, timeout)
            if seen != a.wanted:
                failed[a.topic] = KafkaOperationError(
                    cluster, operation, f"metadata shows {seen} of {a.wanted} partitions after {timeout:.0f}s")
            added.append(a)
            journal_entry("topic_partitions_add", cluster=cluster, topic=a.topic, partitions_before=a.current,
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
                journal_entry(kind, cluster=cluster, topic=verdict.topic, owner=verdict.owner, key=k.key,
                              value=k.target_value, owner_value=k.owner_value, why=k.why)

    # -- align configs (incremental: only the travelling keys are touched, cluster-owned ones stay)
    if plan.align:
        futures, refused = alter_topic_configs(target_client, admin_client,
                                               {al.topic: (al.set, al.delete) for al in plan.align}, timeout)
        align_failed.update(refused)
        for al in plan.align:
            if al.topic not in futures:
                continue
            try:
                futures[al.topic].result(timeout=timeout + 5)
            except Exception as exc:
                align_failed[al.topic] = topic_failure(target_client, f"align configs of {al.topic}", exc,
                                                       Need("TOPIC", al.topic, "ALTER_CONFIGS"))
                continue
            aligned.append(al)
            owned = verdicts.get(al.topic)
            if owned is None:
                journal_entry("topic_config_align", cluster=cluster, topic=al.topic, set=dict(al.set),
                              removed=list(al.delete), **source)
            else:
                journal_entry("topic_config_align", cluster=cluster, topic=al.topic, owner=owned.owner,
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
    """What :func:`sync_topic_shapes` needs of owners (:class:`~mirrorflow.cluster_sync.config_sync.ConfigOwners`)."""

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
    def selected(client: ClusterClient) -> list[str]:  # logical names
        return [logical for t in list_topics(client, timeout) if not is_internal_topic(t)
                and (logical := client.logical(t)) is not None and topology.selects(logical)]

    selected_source, selected_target = selected(source_client), selected(target_client)
    source_shapes = describe_logical(source_client, selected_source, timeout)
    target_shapes = describe_logical(target_client, set(selected_source) | set(selected_target), timeout,
                                     "ALTER_CONFIGS" if owners is not None or align_configs else "DESCRIBE_CONFIGS")
    owned = None
    if owners is not None:
        # The record decides whose value a follower holds (ownership.decide), under every policy: without it
        # an owner's change and the follower's own value look alike, and the follower's longer retention
        # would go. Read every run (one compacted partition) and written only when it changes.
        owned = replace(owners.owned(target_client.name, selected_source), records=owners.records(target_client))
    plan = plan_shape(source_shapes, target_shapes, align_configs=align_configs, owned=owned)
    plan = replace(plan, source_cluster=source_client.name, target_cluster=target_client.name)
    result = _logical(apply_shape(target_client, _on_cluster(plan, target_client),
                                  replication_factor=replication_factor, timeout=timeout), plan, target_client)
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


# --------------------------------------------------------------------------- names per cluster


def _on_cluster(plan: ShapePlan, client: ClusterClient) -> ShapePlan:
    """``plan`` (logical names) as ``client``'s cluster names its topics: what :func:`apply_shape` carries out."""
    if client.topics.is_identity:
        return plan
    name = client.physical

    def renamed(items: Iterable[Any]) -> tuple[Any, ...]:
        return tuple(replace(item, topic=name(item.topic)) for item in items)

    return replace(plan, create=renamed(plan.create), add_partitions=renamed(plan.add_partitions),
                   align=renamed(plan.align), drift=renamed(plan.drift), warnings=renamed(plan.warnings),
                   verdicts=renamed(plan.verdicts), deleted_on_source=tuple(name(t) for t in plan.deleted_on_source),
                   conflicts={name(t): c for t, c in plan.conflicts.items()})


def _logical(result: ShapeResult, plan: ShapePlan, client: ClusterClient) -> ShapeResult:
    """What :func:`apply_shape` did on ``client``'s names, told in logical names again (its errors keep the
    cluster's, which is what the broker refused), with the logical ``plan``."""
    if client.topics.is_identity:
        return result
    def name(topic: str) -> str:
        return client.logical(topic) or topic

    def renamed(items: Iterable[Any]) -> tuple[Any, ...]:
        return tuple(replace(item, topic=name(item.topic)) for item in items)

    return replace(result, plan=plan, created=renamed(result.created),
                   partitions_added=renamed(result.partitions_added), aligned=renamed(result.aligned),
                   already_done=tuple(name(t) for t in result.already_done),
                   failed={name(t): e for t, e in result.failed.items()},
                   align_failed={name(t): e for t, e in result.align_failed.items()})
