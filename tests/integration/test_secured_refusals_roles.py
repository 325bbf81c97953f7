"""Every ACL of the roles beyond the copy links, taken away one at a time: named, and healed once it is back.

tests/integration/test_secured_refusals.py drills the ``source`` and ``target`` ACLs
through level runs. This drills the rest of the table (offsets and failover, lag,
onboarding, decommission, audit, schemas, switch) through the operations that
need them, on a pair of secured clusters (c1 over SCRAM as ``User:mirrorflow``, c2
over mutual TLS as ``User:CN=mirrorflow``) whose principal holds exactly what
:func:`mirrorflow.needed_acls.required_acls` derives for every role. Each ACL of the set
that the source/target drill does not cover is drilled once, on the cluster where
its operation runs (c2, or the primary c1 for the registry's storage topic); the
archive's and the lag monitor's rows are the source's resources and operations
(READ on the topics, DESCRIBE on mirrorflow's groups; DESCRIBE on the groups comes
with READ). Revoked, the operation must fail with an error that
names the cluster, the principal, the operation and the resource; granted again,
the same operation must complete, and what it guards must be as it was before
(a refused commit moved no offset; a refused write wrote nothing that shows).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from mirrorflow.actions.switch import _write_cut
from mirrorflow.cluster_sync import sync_topic_shapes
from mirrorflow.completeness.run import run_audit
from mirrorflow.completeness.store import AUDIT_TOPIC
from mirrorflow.copy.state.checkpoints import checkpoint_group
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.needed_acls import principal_of, required_acls
from mirrorflow.offsets.groups import commit, describe_every_group
from mirrorflow.offsets.position import OFFSETS_TOPIC
from mirrorflow.offsets.sync import publish_owned
from mirrorflow.offsets.topic import ensure_topic, read_positions
from mirrorflow.onboard.plan import _check_transactions
from mirrorflow.schemas.sync import stores_for, sync
from mirrorflow.topology import parse_topology
from tests.integration.acl_refusals import covers
from tests.integration.groups import committed_offsets, consume_and_commit
from tests.integration.mirroring import traffic
from tests.integration.registry import PrimaryRegistry

_pause = threading.Event()  # never set: .wait(t) paces polling


@dataclass
class Case:
    cluster: str
    resource_type: str
    name: str
    operation: str
    run: Callable[[], Any]
    before: Callable[[], None] | None = None  # makes the ACL needed (e.g. deletes what CREATE would make)
    meanwhile: tuple[str, ...] = ()  # operations granted while it is revoked, so that the revoked one is refused
    kept: Callable[[], bool] | None = None  # after the refusal: what it guards is as it was


def _delete_topic(secured, cluster: str, topic: str) -> None:
    admin = AdminClient(secured.admin(cluster))
    if topic in admin.list_topics(timeout=30).topics:
        admin.delete_topics([topic])[topic].result(30)
        deadline = time.monotonic() + 30
        while topic in admin.list_topics(timeout=30).topics:
            assert time.monotonic() < deadline, f"{topic} not deleted on {cluster}"
            _pause.wait(0.2)


def _failure(run: Callable[[], Any]) -> str:
    """What the operation reported: its exception, or the errors of the result it returned."""
    try:
        result = run()
    except Exception as exc:  # the operation's own error, whatever its class
        return f"{type(exc).__name__}: {exc}"
    return "\n".join(_reported(result))


def _reported(result: Any) -> list[str]:
    if result is None or isinstance(result, (bool, int, list, dict)):
        return []
    for attr in ("errors", "failures", "failed", "align_failed", "problems", "unreachable"):
        found = getattr(result, attr, None)
        if found:
            return [str(f) for f in (found.values() if isinstance(found, dict) else found)]
    targets = getattr(result, "targets", None)
    if targets:
        return [str(t.error) for t in targets if getattr(t, "error", None)]
    return []


def test_each_acl_of_the_other_roles_is_named_and_the_operation_completes_once_it_is_back(mirrorflow_acls):
    secured = mirrorflow_acls
    prefix = f"rr{uuid.uuid4().hex[:6]}"
    storage = f"_mirrorflow.test-schemas-{prefix}"
    settings = {"c1": secured.scram("c1"), "c2": secured.mtls("c2")}
    clusters = "\n".join(f'  {n}: {{bootstrap: "{s["bootstrap.servers"]}"}}' for n, s in settings.items())
    topology = parse_topology(f"""
clusters:
{clusters}
tree: {{level: 1, children: [c1, c2]}}
topics: ["{prefix}\\\\..*"]
offsets: {{groups: ["{prefix}-.*"]}}
schemas: {{primary: c1, clusters: {{c1: {{topic: "{storage}"}}, c2: {{topic: "{storage}"}}}}}}
audit: {{window_minutes: 10, grace_minutes: 1}}
""", source="test")
    acls = required_acls(topology, {n: principal_of(s) for n, s in settings.items()})
    secured.grant_acls(acls)
    clients = {n: ClusterClient(n, s) for n, s in settings.items()}
    c2 = clients["c2"]

    # what the operations work on, made by the set-up super user: a topic on both sides with
    # different configurations, messages an hour old (final audit windows), a group's commits on c2,
    # the primary registry's registrations on c1
    topic, group = f"{prefix}.orders", f"{prefix}-app"
    for name, retention in (("c1", "86400000"), ("c2", "3600000")):
        admin = AdminClient(secured.admin(name))
        admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": retention})])[topic].result(30)
    hour_ago = int(time.time() * 1000) - 3_600_000
    for name in ("c1", "c2"):
        traffic(secured.kafka, name, topic, 10, now_ms=hour_ago)
    consume_and_commit(secured.admin("c2"), topic, group, 5)
    registry = PrimaryRegistry(secured.admin("c1"), storage)
    from mirrorflow.kafka.compacted import ensure_compacted
    from mirrorflow.schemas.topic_store import TOPIC_CONFIG
    ensure_compacted(ClusterClient("c1", secured.admin("c1")), storage, TOPIC_CONFIG)
    versions = iter(range(1, 100))

    def register() -> None:  # a new version on the primary, for the sync to write
        registry.register(f"{topic}-value", f'{{"type": "enum", "name": "E", "symbols": ["S{next(versions)}"]}}')

    def schemas() -> Any:
        primary, naming, targets = stores_for(topology, settings)
        return sync(primary, naming, targets)

    windows = iter(range(2, 100))

    def new_window() -> None:  # messages in a window no audit judged yet: a verdict to write
        at = hour_ago - next(windows) * 600_000
        for name in ("c1", "c2"):
            traffic(secured.kafka, name, topic, 2, now_ms=at, tag=f"w{at}")

    def audit() -> Any:
        return run_audit(clients, topology.selects, window_s=600, grace_s=60, run_id=prefix)

    c2_admin = AdminClient(secured.admin("c2"))

    def retention(admin: AdminClient, name: str, value: str) -> None:  # c2's copy drifts from c1's again
        resource = ConfigResource("topic", name, incremental_configs=[
            ConfigEntry("retention.ms", value, incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)

    link = "c1.L1"
    cases = [
        # offsets and failover (and onboarding's positions): the offsets topic, the groups' commits
        Case("c2", "TOPIC", OFFSETS_TOPIC, "CREATE", lambda: ensure_topic(c2),
             before=lambda: _delete_topic(secured, "c2", OFFSETS_TOPIC)),
        Case("c2", "TOPIC", OFFSETS_TOPIC, "WRITE", lambda: publish_owned(c2, [group], topology.selects)),
        Case("c2", "TOPIC", OFFSETS_TOPIC, "READ", lambda: read_positions(c2)),
        Case("c2", "GROUP", f"{prefix}-", "READ", lambda: commit(c2, group, {(topic, 0): (7, "drill")}),
             kept=lambda: committed_offsets(secured.admin("c2"), topic, group, 1) == [5]),
        # decommission: every group a cluster has, to find the active ones
        Case("c2", "GROUP", "*", "DESCRIBE", lambda: describe_every_group(c2)),
        # switch: the link's old checkpoints on the new target are cleared
        Case("c2", "GROUP", checkpoint_group(link), "DELETE", lambda: _write_cut(c2, link, {(topic, 0): 3}, 30)),
        # onboarding: the topics' configurations aligned, transactions proven up front
        Case("c2", "TOPIC", f"{prefix}.", "ALTER_CONFIGS",
             lambda: sync_topic_shapes(clients["c1"], c2, topology, align_configs=True),
             before=lambda: retention(c2_admin, topic, "3600000"), meanwhile=("DESCRIBE_CONFIGS",)),
        Case("c2", "TRANSACTIONAL_ID", "_mirrorflow.preflight.c2", "WRITE", lambda: _check_transactions(c2, "c2", 30)),
        # audit: its verdicts topic, written in transactions
        Case("c2", "TOPIC", AUDIT_TOPIC, "CREATE", audit, before=lambda: _delete_topic(secured, "c2", AUDIT_TOPIC)),
        Case("c2", "TOPIC", AUDIT_TOPIC, "WRITE", audit, before=new_window),
        Case("c2", "TOPIC", AUDIT_TOPIC, "READ", audit, before=new_window),
        Case("c2", "TRANSACTIONAL_ID", AUDIT_TOPIC, "WRITE", audit, before=new_window),
        # schemas through the storage topic: read on the primary, kept on the target
        Case("c1", "TOPIC", storage, "READ", schemas, before=register),
        Case("c2", "TOPIC", storage, "CREATE", schemas,
             before=lambda: (_delete_topic(secured, "c2", storage), register())),
        Case("c2", "TOPIC", storage, "WRITE", schemas, before=register),
        Case("c2", "TOPIC", storage, "READ", schemas, before=register),
    ]
    by_key = {(a.cluster, a.resource_type, a.name, a.operation): a for a in acls}
    problems = []
    for case in cases:
        acl = by_key[(case.cluster, case.resource_type, case.name, case.operation)]
        what = f"{acl.cluster} {acl.resource_type} {acl.pattern_type} {acl.name} {acl.operation}"
        if case.before:
            case.before()
        secured.revoke_acl(acl)
        narrower = [dataclasses.replace(acl, operation=op) for op in case.meanwhile]
        secured.grant_acls(narrower)
        try:
            failure = _failure(case.run)
        finally:
            for other in narrower:
                secured.revoke_acl(other)
            secured.grant_acls([acl])
        if not covers(acl, failure):
            problems.append(f"{what}: {failure[:600] or 'no error at all'}")
        if case.kept is not None and not case.kept():
            problems.append(f"{what}: the refused operation changed what it guards")
        healed = _failure(case.run)
        if healed:
            problems.append(f"{what} granted again, still failing: {healed[:600]}")
    assert not problems, "\n".join(problems)
    # the commit after the re-grant did commit
    assert committed_offsets(secured.admin("c2"), topic, group, 1) == [7]
