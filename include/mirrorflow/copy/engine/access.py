"""What each stage of a copy asks of which cluster, so that a refused permission is named exactly.

A copy reads its checkpoint and writes copies on the target, reads messages on
the source, and commits both in a transaction on the target: each stage needs
other ACLs (docs/security.md, roles ``source`` and ``target``). The copier marks
where it is with :func:`during`; when the broker refuses, :func:`named` says which
cluster refused which operation on which resource, at which stage.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import KafkaException

from mirrorflow.copy.engine.clients import reader_group
from mirrorflow.copy.state.checkpoints import checkpoint_group
from mirrorflow.copy.task import PartitionTask
from mirrorflow.copy.txn_groups import transactional_id
from mirrorflow.internal_names import in_namespace
from mirrorflow.kafka import ClusterClient, Need, NotAuthorized, refusal

#: The attribute :func:`during` sets on a ``KafkaException`` (the innermost stage wins).
_STAGE = "mirrorflow_stage"


@contextmanager
def during(stage: str) -> Iterator[None]:
    """Mark a ``KafkaException`` raised inside with the copy's stage (one of :func:`stage_needs`'s)."""
    try:
        yield
    except KafkaException as exc:
        if getattr(exc, _STAGE, None) is None:
            setattr(exc, _STAGE, stage)
        raise


def stage_of(exc: BaseException) -> str | None:
    return getattr(exc, _STAGE, None)


def stage_needs(task: PartitionTask, stage: str, namespace: str = "") -> tuple[str, str, tuple[Need, ...]]:
    """(``source`` or ``target``, what the copy was doing, what it needed there) at ``stage``; ``namespace``: the
    clients' (:meth:`ClusterClient.own`)."""
    txn = in_namespace(transactional_id(task.link_id, task.topic, task.partition), namespace)
    group = in_namespace(checkpoint_group(task.link_id), namespace)
    source, target = task.source_topic, task.target_topic  # the resources are the clusters' names
    where = f"{task.topic}[{task.partition}] of link {task.link_id}"
    if stage == "start":
        return "target", f"starting the exactly-once producer of {where}", (
            Need("TRANSACTIONAL_ID", txn, "WRITE"),)
    if stage == "checkpoint":
        return "target", f"reading the checkpoint of {where}", (
            Need("GROUP", group, "READ"), Need("TOPIC", target, "DESCRIBE"))
    if stage == "offsets":
        return "source", f"reading the source offsets of {where}", (Need("TOPIC", source, "DESCRIBE"),)
    if stage == "read":
        return "source", f"reading the messages of {where}", (
            Need("TOPIC", source, "READ"),
            Need("GROUP", in_namespace(reader_group(task.link_id), namespace), "DESCRIBE"))
    if stage == "produce":
        return "target", f"writing the copies of {where}", (
            Need("TOPIC", target, "WRITE"), Need("TRANSACTIONAL_ID", txn, "WRITE"))
    # commit: the checkpoint goes into the copies' transaction (or is committed by the link's group)
    return "target", f"committing the checkpoint of {where}", (
        Need("GROUP", group, "READ"), Need("TOPIC", target, "READ"), Need("TRANSACTIONAL_ID", txn, "WRITE"))


def unexplained(task: PartitionTask, stage: str | None, error: Any, source: ClusterClient,
                target: ClusterClient) -> str:
    """An error that is no refusal, with what the copy was doing and where (librdkafka's text names neither)."""
    if stage is None:
        return f"{error.name()}: {error.str()}"
    side, doing, _ = stage_needs(task, stage, target.namespace)
    cluster = source.name if side == "source" else target.name
    return f"{error.name()} on {cluster} while {doing}: {error.str()}"


def named(task: PartitionTask, stage: str | None, error: Any, source: ClusterClient,
          target: ClusterClient) -> NotAuthorized | None:
    """``error`` as the permission it shows missing, or ``None`` when it is no authorization error."""
    side, doing, needs = stage_needs(task, stage or "commit", target.namespace)
    client = source if side == "source" else target
    return refusal(client.name, client.settings, error, doing, *needs)
