"""Topic ACLs carried from the owner to a cluster: read the bindings, create and delete, remember what was made.

What travels and as what is :mod:`mirrorflow.cluster_sync.acl_plan` (pure). Here: the
owner's bindings are read once per plan (:class:`GrantOwner`); on each cluster
its bindings and its record are read, the difference is created or deleted
(never the whole set again), and the record is updated. The record is the
compacted topic ``_mirrorflow.acl-grants`` on that cluster, one record per
binding mirrorflow made (a tombstone once it deleted it): how mirrorflow knows
which grants are its own, so a grant someone made by hand is never removed.

On a read-only cluster the same loop applies the guard's denies
(:mod:`mirrorflow.cluster_sync.read_only_guard`), recorded as the guard's; the record also holds
which topics a failover opened to writers, for which consumer groups
(:func:`move_groups`), so every later level run leaves them open.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping
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

from mirrorflow import formats
from mirrorflow.cluster_sync.acl_plan import (
    Grant,
    GrantPlan,
    GrantRules,
    Refusal,
    Selection,
    arrival,
    as_on,
    plan_grants,
    select,
)
from mirrorflow.cluster_sync.read_only_guard import GUARD, plan_guard
from mirrorflow.declined import Declined
from mirrorflow.errors import KafkaOperationError, MirrorflowError
from mirrorflow.formats import NewerFormat
from mirrorflow.internal_names import ACL_GRANTS_READER_GROUP, ACL_GRANTS_TOPIC
from mirrorflow.journal import journal_entry
from mirrorflow.kafka import (
    CLUSTER_RESOURCE,
    ClusterClient,
    Need,
    admin_for,
    call_failed,
    ensure_compacted,
    list_topics,
    principal_of,
    read_whole,
    write_all,
)

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
                                                       "ACLs cannot be kept in sync nor guarded read-only; leave it "
                                                       "out of acl_sync (turn it off or drop it from read_only)")
    return call_failed(client, doing, error, Need("CLUSTER", CLUSTER_RESOURCE, operation))


def read_grants(client: ClusterClient, timeout: float = 30.0) -> set[Grant]:
    """Every topic and group binding on the cluster."""
    admin = admin_for(client)  # kept: a collected client cancels its futures
    try:
        found = admin.describe_acls(_ANY, request_timeout=timeout).result(timeout=timeout + 5)
    except Exception as exc:
        raise _failed(client, "describe ACLs", exc, "DESCRIBE") from exc
    return {_grant(b) for b in found if b.restype.name in ("TOPIC", "GROUP")}


#: The record's format (``"v"``; mirrorflow.formats); values without one are format 1 (before 0.2.0).
FORMAT = formats.FORMATS["acl-grants"].version
#: The record's value of a binding, by who wanted it: the owner's sync, or the read-only guard.
_KINDS = {"sync": json.dumps({"v": FORMAT}).encode(), "guard": json.dumps({"by": GUARD, "v": FORMAT}).encode()}
_LIFTED = "lifted"


@dataclass
class GrantRecord:
    """What a cluster's record says: the bindings mirrorflow made there (and for what), the guard's lifted topics."""

    made: dict[Grant, str] = field(default_factory=dict)
    #: topic -> the consumer groups whose failover to this cluster opened it to writers.
    lifted: dict[str, frozenset[str]] = field(default_factory=dict)

    def made_for(self, kind: str) -> set[Grant]:
        return {g for g, k in self.made.items() if k == kind}


def _lifted_key(topic: str) -> bytes:
    return json.dumps([_LIFTED, topic]).encode()


def read_record(client: ClusterClient, timeout: float = 30.0) -> GrantRecord:
    """The cluster's record (``_mirrorflow.acl-grants``), read whole; an unreadable entry is named and skipped."""
    record = GrantRecord()
    for msg in read_whole(client, client.own(ACL_GRANTS_TOPIC), ACL_GRANTS_READER_GROUP, timeout):
        try:
            key = json.loads((msg.key() or b"").decode())
            value = json.loads(msg.value()) if msg.value() is not None else None
            if isinstance(value, dict):  # a newer format stops the sync by name: its owners may not be this one's
                formats.check_record("acl-grants", value, f"topic {client.own(ACL_GRANTS_TOPIC)} on {client.name}, "
                                                          f"offset {msg.offset()}", missing=1)
            if isinstance(key, list) and len(key) == 2 and key[0] == _LIFTED:
                if value is None:
                    record.lifted.pop(key[1], None)
                else:
                    record.lifted[key[1]] = frozenset(value["groups"])
                continue
            grant = Grant(*key)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("%s %s@%d: %s; skipped", client.name, client.own(ACL_GRANTS_TOPIC), msg.offset(), exc)
            continue
        if value is None:
            record.made.pop(grant, None)
        elif value.get("by", "sync") in (GUARD, "sync"):
            record.made[grant] = "guard" if value.get("by") == GUARD else "sync"
        else:  # made for a purpose this mirrorflow does not know: never counted as the sync's (it could delete it)
            raise NewerFormat("acl-grants", f"'by': {value['by']!r}", f"topic {client.own(ACL_GRANTS_TOPIC)} on "
                                                                      f"{client.name}, offset {msg.offset()}")
    return record


def _write_record(client: ClusterClient, records: list[tuple[bytes, bytes | None]], timeout: float) -> None:
    ensure_compacted(client, client.own(ACL_GRANTS_TOPIC), {"cleanup.policy": "compact"}, timeout)
    write_all(client, client.own(ACL_GRANTS_TOPIC), records, timeout=timeout)


@dataclass
class GrantResult:
    """What one cluster got; ``problems`` name what failed (the copy goes on); ``declined``: what the sync would
    not do on its own (a binding that would widen access or miss its principal, deletions past the bound)."""

    plan: GrantPlan | None = None
    created: list[Grant] = field(default_factory=list)
    deleted: list[Grant] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    declined: tuple[Declined, ...] = ()


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


def apply_grants(client: ClusterClient, plan: GrantPlan, previous: set[Grant], timeout: float = 30.0,
                 kind: str = "sync") -> GrantResult:
    """Create and delete what ``plan`` says on ``client``, then bring its record up to date.

    ``kind``: whose plan it is (``sync``: the owner's grants; ``guard``: a read-only
    cluster's denies); ``previous``: the bindings the record holds for that kind.
    """
    result = GrantResult(plan)
    admin = admin_for(client)  # kept: a collected client cancels its futures
    why = "read-only: only mirrorflow writes mirrored topics here" if kind == "guard" else f"as on {plan.owner}"
    result.created, problems = _each(client, "create", admin.create_acls,
                                     {g: _binding(g) for g in plan.create}, timeout)
    result.problems += problems
    for grant in result.created:
        journal_entry("acl_create", cluster=client.name, owner=plan.owner, acl=str(grant), why=why)
    result.deleted, problems = _each(client, "delete", admin.delete_acls,
                                     {g: _binding(g, AclBindingFilter) for g in plan.delete}, timeout)
    result.problems += problems
    for grant in result.deleted:
        journal_entry("acl_delete", cluster=client.name, owner=plan.owner, acl=str(grant),
                      why="the guard no longer wants it" if kind == "guard" else
                      f"gone from {plan.owner}, and mirrorflow made it")
    made = (plan.made - set(plan.create) - set(plan.delete)) | set(result.created) \
        | (set(plan.delete) - set(result.deleted))
    records: list[tuple[bytes, bytes | None]] = [(g.key().encode(), _KINDS[kind]) for g in sorted(made - previous)]
    records += [(g.key().encode(), None) for g in sorted(previous - made)]
    if records:
        try:
            _write_record(client, records, timeout)
        except MirrorflowError as exc:
            result.problems.append(f"the ACLs just made could not be recorded in {client.own(ACL_GRANTS_TOPIC)} "
                                   f"({exc}): "
                                   "until they are, mirrorflow will not delete them when they are no longer wanted")
    for problem in result.problems:
        log.error("cluster %s: ACL sync: %s", client.name, problem)
    return result


def _merge(first: GrantResult, second: GrantResult) -> GrantResult:
    return GrantResult(first.plan or second.plan, first.created + second.created, first.deleted + second.deleted,
                       first.problems + second.problems, first.declined + second.declined)


def declined(cluster: str, refused: Iterable[Refusal], plan: GrantPlan, have: Iterable[Grant]) -> tuple[Declined, ...]:
    """What the sync declined on ``cluster`` this run, as the shared record: each refused binding the cluster does
    not hold already, and the deletions held back by ``max_delete_share`` (one record for all of them)."""
    have = set(have)
    out = [Declined("acl_sync", cluster, str(r.grant), "create ACL", r.reason, r.allow)
           for r in refused if r.grant not in have]
    if plan.withheld:
        out.append(Declined("acl_sync", cluster, "the ACL grants mirrorflow made",
                            f"delete {len(plan.withheld)} grants", plan.withheld_reason(), "acl_sync.max_delete_share"))
    return tuple(out)


def _mirrored(client: ClusterClient, rules: GrantRules, timeout: float) -> list[str]:
    """The mirrored topics of ``client``'s cluster, under its names (the guard's denies name them so)."""
    return sorted(t for t in list_topics(client, timeout) if (n := client.logical(t)) is not None and rules.mirrors(n))


def _guard(client: ClusterClient, rules: GrantRules, have: set[Grant], record: GrantRecord, own: set[str],
           timeout: float) -> GrantResult:
    """Bring a read-only cluster's DENY bindings in line with its writers and its lifted topics."""
    mine = principal_of(client.settings)
    if mine is None:
        problem = (f"cannot tell which principal mirrorflow logs in as on {client.name} (its login names no user): "
                   "the read-only guard would deny mirrorflow itself, so it is not applied there")
        log.error("cluster %s: %s", client.name, problem)
        return GrantResult(problems=[problem])
    guard = plan_guard(client.name, _mirrored(client, rules, timeout), have, own | {mine}, record.lifted)
    made = record.made_for("guard")
    plan = plan_grants(client.name, GUARD, guard.denies, have, made)
    result = apply_grants(client, plan, made, timeout, kind="guard")
    for line in guard.unguarded:
        log.error("cluster %s: %s", client.name, line)
    result.problems += list(guard.unguarded)
    return result


def _own_principals(clients: Mapping[str, ClusterClient]) -> set[str]:
    return {p for c in clients.values() if (p := principal_of(c.settings)) is not None}


class GrantOwner:
    """The owner's travelling grants, read once; :meth:`sync` brings one cluster in line with them.

    On a read-only cluster it also applies the guard (:mod:`mirrorflow.cluster_sync.read_only_guard`),
    with or without the owner's grants travelling (``rules.sync``).
    """

    def __init__(self, rules: GrantRules, clients: Mapping[str, ClusterClient], timeout: float = 30.0,
                 unread: str | None = None) -> None:
        self.rules = rules
        self._clients = dict(clients)
        self._timeout = timeout
        self._lock = threading.Lock()
        self._selection: Selection | None = None
        self._unread = unread if rules.sync else "acl_sync is off"

    def _owner_grants(self) -> Selection | None:
        if self._selection is None and self._unread is None:
            owner = self._clients.get(self.rules.owner)
            try:
                if owner is None:
                    raise MirrorflowError(f"no client settings for cluster {self.rules.owner}")
                # every topic the owner has, mirrored or not: a prefix that covers an unmirrored one stays
                topics = list(list_topics(owner, self._timeout))
                self._selection = select(read_grants(owner, self._timeout), self.rules, topics,
                                         _own_principals(self._clients))
            except MirrorflowError as exc:
                self._unread = str(exc)
                log.warning("ACLs are not synced from %s in this run (left as they are everywhere): %s",
                            self.rules.owner, exc)
        return self._selection

    def sync(self, target: ClusterClient) -> GrantResult:
        """Bring ``target``'s travelling grants in line with the owner's, and its guard if it is read-only
        (call it once per cluster and plan)."""
        with self._lock:
            guarded = target.name in self.rules.read_only
            selection = self._owner_grants() if target.name != self.rules.owner else None
            if selection is None and not guarded:
                return GrantResult()
            try:
                have, record = read_grants(target, self._timeout), read_record(target, self._timeout)
            except MirrorflowError as exc:
                log.error("cluster %s: ACL sync: %s", target.name, exc)
                return GrantResult(problems=[str(exc)])
            result = GrantResult()
            if selection is not None:
                arrived = arrival(target.name, selection.travel, self.rules, principal_of(target.settings))
                refused = [Refusal(as_on(r.grant, self.rules, target.name), r.reason, r.allow)
                           for r in selection.refused] + list(arrived.refused)
                made = record.made_for("sync")
                plan = plan_grants(target.name, self.rules.owner, arrived.wanted, have, made,
                                   self.rules.max_delete_share)
                result = apply_grants(target, plan, made, self._timeout)
                result.declined = declined(target.name, refused, plan, have)
                have = (have | set(result.created)) - set(result.deleted)
            if guarded:
                try:
                    result = _merge(result, _guard(target, self.rules, have, record,
                                                   _own_principals(self._clients), self._timeout))
                except MirrorflowError as exc:
                    log.error("cluster %s: read-only guard: %s", target.name, exc)
                    result.problems.append(str(exc))
            return result


@dataclass(frozen=True)
class GuardChange:
    """A failover's effect on a read-only cluster's guard: the topics opened or closed again, and what failed."""

    cluster: str
    lifted: tuple[str, ...] = ()
    rearmed: tuple[str, ...] = ()
    result: GrantResult = field(default_factory=GrantResult)


def move_groups(client: ClusterClient, rules: GrantRules, clients: Mapping[str, ClusterClient],
                topics: Mapping[str, Iterable[str]], arriving: bool, timeout: float = 30.0) -> GuardChange:
    """Consumer groups failed over to (``arriving``) or away from read-only ``client``: its guard follows them.

    ``topics``: group -> the mirrored topics it consumes (logical names; the record holds
    the cluster's). Arriving lifts the guard for
    those topics (the applications move there); leaving removes the groups from the
    lifted topics and closes each topic no group holds open any more. The record is
    written first, then the denies are brought in line at once (as a level run would).
    """
    record = read_record(client, timeout)
    before = dict(record.lifted)
    for group, consumed in topics.items():
        for topic in (client.physical(t) for t in consumed if rules.mirrors(t)):
            held = set(record.lifted.get(topic, frozenset()))
            held = held | {group} if arriving else held - {group}
            if held:
                record.lifted[topic] = frozenset(held)
            else:
                record.lifted.pop(topic, None)
    changed = sorted(t for t in set(before) | set(record.lifted) if before.get(t) != record.lifted.get(t))
    if changed:
        _write_record(client, [(_lifted_key(t), json.dumps({"groups": sorted(record.lifted[t]), "v": FORMAT}).encode()
                                if t in record.lifted else None) for t in changed], timeout)
    result = _guard(client, rules, read_grants(client, timeout), record, _own_principals(clients), timeout)
    said = {t: client.logical(t) or t for t in changed}  # said in logical names, as every report is
    return GuardChange(client.name, lifted=tuple(said[t] for t in changed if t in record.lifted and t not in before),
                       rearmed=tuple(said[t] for t in changed if t not in record.lifted), result=result)
