"""Topic ACLs carried from the owner to a cluster: read the bindings, create and delete, remember what was made.

What travels and as what is :mod:`mirrorflow.kafka.grants` (pure). Here: the
owner's bindings are read once per plan (:class:`GrantOwner`); on each cluster
its bindings and its record are read, the difference is created or deleted
(never the whole set again), and the record is updated. The record is the
compacted topic ``_mirrorflow.acl-grants`` on that cluster, one record per
binding mirrorflow made (a tombstone once it deleted it): how mirrorflow knows
which grants are its own, so a grant someone made by hand is never removed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from mirrorflow.errors import KafkaOperationError, MirrorflowError
from mirrorflow.internal_names import ACL_GRANTS_READER_GROUP, ACL_GRANTS_TOPIC
from mirrorflow.journal import audit
from mirrorflow.kafka.admin import list_topics
from mirrorflow.kafka.compacted import ensure_compacted, read_whole, write_all
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.grants import Grant, GrantPlan, GrantRules, as_on, plan_grants, travels
from mirrorflow.kafka.principal import principal_of
from mirrorflow.kafka.refusals import CLUSTER_RESOURCE, Need, call_failed
from mirrorflow.kafka.shared import admin_for

log = logging.getLogger(__name__)

_ANY = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                        AclPermissionType.ANY)


def _grant(binding: AclBinding) -> Grant:
    return Grant(binding.restype.name, binding.name, binding.resource_pattern_type.name, binding.principal,
                 binding.host, binding.operation.name, binding.permission_type.name)


def _binding(grant: Grant, kind: type = AclBinding) -> Any:
    return kind(ResourceType[grant.resource_type], grant.name, ResourcePatternType[grant.pattern_type],
                grant.principal, grant.host, AclOperation[grant.operation], AclPermissionType[grant.permission])


def _failed(client: ClusterClient, doing: str, exc: BaseException, operation: str) -> MirrorflowError:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if getattr(error, "code", lambda: None)() == KafkaError.SECURITY_DISABLED:
        return KafkaOperationError(client.name, doing, "the cluster has no authorizer (SECURITY_DISABLED): its "
                                                       "ACLs cannot be kept in sync; turn acl_sync off for it")
    return call_failed(client, doing, error, Need("CLUSTER", CLUSTER_RESOURCE, operation))


def read_grants(client: ClusterClient, timeout: float = 30.0) -> set[Grant]:
    """Every topic and group binding on the cluster."""
    admin = admin_for(client)  # kept: a collected client cancels its futures
    try:
        found = admin.describe_acls(_ANY, request_timeout=timeout).result(timeout=timeout + 5)
    except Exception as exc:
        raise _failed(client, "describe ACLs", exc, "DESCRIBE") from exc
    return {_grant(b) for b in found if b.restype.name in ("TOPIC", "GROUP")}


def read_made(client: ClusterClient, timeout: float = 30.0) -> set[Grant]:
    """The grants mirrorflow made on this cluster and has not deleted (its record)."""
    made: set[Grant] = set()
    for msg in read_whole(client, ACL_GRANTS_TOPIC, ACL_GRANTS_READER_GROUP, timeout):
        try:
            grant = Grant.from_key((msg.key() or b"").decode())
        except (ValueError, TypeError) as exc:
            log.warning("%s %s@%d: %s; skipped", client.name, ACL_GRANTS_TOPIC, msg.offset(), exc)
            continue
        if msg.value() is None:
            made.discard(grant)
        else:
            made.add(grant)
    return made


@dataclass
class GrantResult:
    """What one cluster got; ``problems`` name what failed (the copy goes on)."""

    plan: GrantPlan | None = None
    created: list[Grant] = field(default_factory=list)
    deleted: list[Grant] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _each(client: ClusterClient, doing: str, call: Any, items: Mapping[Grant, Any],
          timeout: float) -> tuple[list[Grant], list[str]]:
    """One admin call (create or delete) over ``items`` (grant -> its binding or filter): what it did, what failed."""
    if not items:
        return [], []
    try:
        futures = call(list(items.values()), request_timeout=timeout)
    except Exception as exc:
        return [], [str(_failed(client, f"{doing} ACLs", exc, "ALTER"))]
    done, problems = [], []
    for grant, binding in items.items():
        try:
            futures[binding].result(timeout=timeout + 5)
        except Exception as exc:
            problems.append(str(_failed(client, f"{doing} ACL {grant}", exc, "ALTER")))
            continue
        done.append(grant)
    return done, problems


def apply_grants(client: ClusterClient, plan: GrantPlan, previous: set[Grant], timeout: float = 30.0) -> GrantResult:
    """Create and delete what ``plan`` says on ``client``, then bring its record up to date."""
    result = GrantResult(plan)
    admin = admin_for(client)  # kept: a collected client cancels its futures
    result.created, problems = _each(client, "create", admin.create_acls,
                                     {g: _binding(g) for g in plan.create}, timeout)
    result.problems += problems
    for grant in result.created:
        audit("acl_create", cluster=client.name, owner=plan.owner, acl=str(grant))
    result.deleted, problems = _each(client, "delete", admin.delete_acls,
                                     {g: _binding(g, AclBindingFilter) for g in plan.delete}, timeout)
    result.problems += problems
    for grant in result.deleted:
        audit("acl_delete", cluster=client.name, owner=plan.owner, acl=str(grant),
              why=f"gone from {plan.owner}, and mirrorflow made it")
    made = (plan.made - set(plan.create) - set(plan.delete)) | set(result.created) \
        | (set(plan.delete) - set(result.deleted))
    records: list[tuple[bytes, bytes | None]] = [(g.key().encode(), b"{}") for g in sorted(made - previous)]
    records += [(g.key().encode(), None) for g in sorted(previous - made)]
    if records:
        try:
            ensure_compacted(client, ACL_GRANTS_TOPIC, {"cleanup.policy": "compact"}, timeout)
            write_all(client, ACL_GRANTS_TOPIC, records, timeout=timeout)
        except MirrorflowError as exc:
            result.problems.append(f"the ACLs just made could not be recorded in {ACL_GRANTS_TOPIC} ({exc}): "
                                   "until they are, mirrorflow will not delete them when the owner does")
    for problem in result.problems:
        log.error("cluster %s: ACL sync: %s", client.name, problem)
    return result


class GrantOwner:
    """The owner's travelling grants, read once; :meth:`sync` brings one cluster in line with them."""

    def __init__(self, rules: GrantRules, clients: Mapping[str, ClusterClient], timeout: float = 30.0,
                 unread: str | None = None) -> None:
        self.rules = rules
        self._clients = dict(clients)
        self._timeout = timeout
        self._lock = threading.Lock()
        self._grants: set[Grant] | None = None
        self._unread = unread

    def _owner_grants(self) -> set[Grant] | None:
        if self._grants is None and self._unread is None:
            owner = self._clients.get(self.rules.owner)
            try:
                if owner is None:
                    raise MirrorflowError(f"no client settings for cluster {self.rules.owner}")
                topics = list(list_topics(owner, self._timeout))
                own = {p for c in self._clients.values() if (p := principal_of(c.settings)) is not None}
                self._grants = {g for g in read_grants(owner, self._timeout) if travels(g, self.rules, topics, own)}
            except MirrorflowError as exc:
                self._unread = str(exc)
                log.warning("ACLs are not synced from %s in this run (left as they are everywhere): %s",
                            self.rules.owner, exc)
        return self._grants

    def sync(self, target: ClusterClient) -> GrantResult:
        """Bring ``target``'s travelling grants in line with the owner's (call it once per cluster and plan)."""
        with self._lock:
            grants = self._owner_grants()
            if target.name == self.rules.owner or grants is None:
                return GrantResult()
            try:
                have, made = read_grants(target, self._timeout), read_made(target, self._timeout)
            except MirrorflowError as exc:
                result = GrantResult(problems=[str(exc)])
                log.error("cluster %s: ACL sync: %s", target.name, exc)
            else:
                own = principal_of(target.settings)
                wanted = {as_on(g, self.rules, target.name) for g in grants}
                plan = plan_grants(target.name, self.rules.owner, {g for g in wanted if g.principal != own},
                                   have, made)
                result = apply_grants(target, plan, made, self._timeout)
            return result

