"""Every ACL of a copy link, taken away one at a time: the level run fails naming it, and heals once it is back.

A pair on secured clusters (c1 over SCRAM as ``User:mirrorflow``, c2 over mutual TLS as
``User:CN=mirrorflow``) holding exactly the ``source`` and ``target`` ACLs that
:func:`mirrorflow.needed_acls.required_acls` derives. For each ACL: it is revoked while
work waits that needs every permission of both links (new topics on either side,
topics whose partitions must grow on either side, messages both ways); the level
run must fail, and every error it reports must name the cluster, the principal,
the operation and a resource the revoked ACL covers; links and partitions the ACL
does not concern must still be copied. The ACL is granted again before the next one
is taken. Once all are back, the next run must complete every round's work from where
its refusal left it, and both clusters then hold every message exactly once (no order
check: counted: the order per key is what the mirroring tests check).

Two ACLs are not failures when missing, and the test holds them to what they do
instead: without DESCRIBE_CONFIGS on the cluster a warning names it (the copier
keeps checkpoints alive on Kafka's default retention); without DESCRIBE on the
``_mirrorflow`` groups, a consumer's group lookup is refused at a moment librdkafka
chooses, so a run may complete, and when it does not, the error names it.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import Counter

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from mirrorflow.internal_names import TOPIC_CONFIGS_TOPIC
from mirrorflow.needed_acls import principal_of, required_acls
from mirrorflow.topology import Topology, parse_topology
from tests.integration.acl_refusals import covers
from tests.integration.mirroring import run_level, traffic

#: Missing, these do not fail a run (see the module docstring).
NOT_FATAL = {("CLUSTER", "DESCRIBE_CONFIGS"), ("GROUP", "DESCRIBE")}


def _create(secured, cluster: str, topics: dict[str, int]) -> None:
    admin = AdminClient(secured.admin(cluster))
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        future.result(30)


def _traffic(secured, origin: str, topics: list[str], count: int) -> dict[str, list[str]]:
    """``count`` unique messages on each of ``topics`` of ``origin``, by one producer; their values, by topic."""
    sent = {t: [f"{origin}|{t}|{i}" for i in range(count)] for t in topics}
    producer = Producer({**secured.admin(origin), "enable.idempotence": True, "linger.ms": 5})
    for topic, values in sent.items():
        for i, value in enumerate(values):
            producer.produce(topic, key=f"k{i % 3}".encode(), value=value.encode())
    assert producer.flush(60) == 0, f"{origin}: not every message was acknowledged"
    return sent


def _values(config, topics: list[str]) -> Counter:
    """Every committed value of ``topics``, counted: one consumer, every partition at once, to the stable end."""
    admin = AdminClient(config)
    metadata = admin.list_topics(timeout=30)
    tps = [TopicPartition(t, p) for t in topics for p in metadata.topics[t].partitions]
    ends = {(tp.topic, tp.partition): f.result().offset for tp, f in admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in tps}, isolation_level=IsolationLevel.READ_COMMITTED).items()}
    left = {k for k, end in ends.items() if end > 0}
    consumer = Consumer({**config, "group.id": "test-reader", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in ends])
    counts: Counter = Counter()
    deadline = time.monotonic() + 120
    try:
        while left:
            assert time.monotonic() < deadline, f"not read to the end: {sorted(left)[:5]}"
            for msg in consumer.consume(1000, timeout=0.05):  # a partial batch waits the whole timeout
                key = (msg.topic(), msg.partition())
                if not msg.error() and msg.offset() < ends[key]:
                    counts[msg.value().decode()] += 1
                if msg.offset() + (0 if msg.error() else 1) >= ends[key]:
                    left.discard(key)
    finally:
        consumer.close()
    return counts


def _pair(settings, topics: str):
    clusters = "\n".join(f'  {n}: {{bootstrap: "{s["bootstrap.servers"]}"}}' for n, s in settings.items())
    return parse_topology(f"clusters:\n{clusters}\ntree: {{level: 1, children: [c1, c2]}}\ntopics: [\"{topics}\"]\n",
                          source="test")


def _pair_shape(error: str, i: int | None = None) -> bool:
    """A pair's own passing state, not a permission: a topic one side has grown is, until the other
    link grows it there too, one partition short for the way back, which that link says and waits for
    (``i``: in round ``i``'s topics; ``None``: in any round's)."""
    grown = rf"\.i{i if i is not None else '[0-9]+'}-grow-"
    return re.search(grown, error) is not None and "clears by itself" in error


def test_each_missing_acl_is_named_and_the_run_completes_once_it_is_back(mirrorflow_acls, caplog):
    secured = mirrorflow_acls
    prefix = f"rf{uuid.uuid4().hex[:6]}"
    settings = {"c1": secured.scram("c1"), "c2": secured.mtls("c2")}
    topology = _pair(settings, f"{prefix}\\\\..*")
    acls = required_acls(topology, {n: principal_of(s) for n, s in settings.items()}, roles=["source", "target"])
    # Each round mirrors only its own topics (the ACLs cover them all): runs stay as short as the first.
    rounds = [_pair(settings, f"{prefix}\\\\.i{i}-.*") for i in range(len(acls))]
    secured.grant_acls(acls)
    # Each round's work, made before any ACL is taken, needs every permission of both links: a topic each
    # cluster must create, a topic each must grow, and messages both ways.
    on_c1, on_c2, by_origin = {}, {}, {"c1": [], "c2": []}
    for i in range(len(acls)):
        made_on_c2, made_on_c1 = f"{prefix}.i{i}-from-c1", f"{prefix}.i{i}-from-c2"
        grow_c2, grow_c1 = f"{prefix}.i{i}-grow-c2", f"{prefix}.i{i}-grow-c1"
        on_c1.update({made_on_c2: 1, grow_c2: 2, grow_c1: 1})
        on_c2.update({made_on_c1: 1, grow_c2: 1, grow_c1: 2})
        by_origin["c1"] += [made_on_c2, grow_c2]
        by_origin["c2"] += [made_on_c1, grow_c1]
    _create(secured, "c1", on_c1)
    _create(secured, "c2", on_c2)
    sent = {**_traffic(secured, "c1", by_origin["c1"], 6), **_traffic(secured, "c2", by_origin["c2"], 6)}
    caplog.set_level(logging.WARNING)

    for i, acl in enumerate(acls):
        secured.revoke_acl(acl)
        caplog.clear()
        errors = [e for e in run_level(rounds[i], 1, settings).summary()["errors"] if not _pair_shape(e, i)]
        what = f"{acl.cluster} {acl.resource_type} {acl.pattern_type} {acl.name} {acl.operation}"
        if acl.name == TOPIC_CONFIGS_TOPIC:  # the config sync's memory: without it configs are only reported (a
            assert all(covers(acl, e) for e in errors), (what, errors)  # warning, when it is read), the copy goes on
        elif (acl.resource_type, acl.operation) in NOT_FATAL:
            assert all(covers(acl, e) for e in errors), (what, errors)
            if acl.resource_type == "CLUSTER":
                assert any(covers(acl, r.getMessage()) for r in caplog.records), (what, caplog.text[-2000:])
        else:
            assert errors, f"{what}: revoked, yet the run reported no error"
            assert all(covers(acl, e) for e in errors), (what, errors)
        secured.grant_acls([acl])

    # Every ACL back: one run completes what each refusal left (a pair's own passing state aside, see _pair_shape).
    healed = run_level(topology, 1, settings)
    if not healed.ok and all(_pair_shape(e) for e in healed.summary()["errors"]):
        healed = run_level(topology, 1, settings)
    assert healed.ok, healed.summary()["errors"]

    expected = Counter(i for ids in sent.values() for i in ids)
    for cluster in ("c1", "c2"):
        held = _values(secured.admin(cluster), sorted(sent))
        assert held == expected, (f"{cluster}: missing {sorted(expected - held)[:5]}, "
                                  f"extra or duplicated {sorted(held - expected)[:5]}")


def _bindings(secured, cluster: str) -> set[tuple]:
    """Every topic and group binding on ``cluster`` but mirrorflow's own, read by the set-up super user."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    admin = AdminClient(secured.admin(cluster))  # kept: a collected client cancels its futures
    found = admin.describe_acls(every, request_timeout=30).result(timeout=35)
    return {(b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.operation.name,
             b.permission_type.name) for b in found
            if b.restype.name in ("TOPIC", "GROUP") and "mirrorflow" not in b.principal}


def test_acls_travel_from_the_owner_mapped_and_read_only_and_only_what_mirrorflow_made_goes(mirrorflow_acls,
                                                                                            caplog):
    """ACL sync with the least-privilege principal (exactly the derived ``source`` and ``target`` ACLs): the
    owner c1's grants on a mirrored topic, a prefix and a named group reach c2 under the mapped principal, WRITE
    as READ (``write: read``), a DENY as it is; a grant removed on c1 goes from c2; a grant made on c2 by hand
    stays; a run with nothing changed creates and deletes nothing; c1 is never touched. c2 names mirrored topics and
    groups its own way (``eu-<name>``): every binding arrives under c2's names, and the derived ACLs name them too."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    secured = mirrorflow_acls
    prefix = f"as{uuid.uuid4().hex[:6]}"
    settings = {"c1": secured.scram("c1"), "c2": secured.mtls("c2")}
    names = {"c2": {"names": {"topic_prefix": "eu-", "group_prefix": "eu-"}}}
    topology = Topology.parse({
        "clusters": {n: {"bootstrap": s["bootstrap.servers"], **names.get(n, {})} for n, s in settings.items()},
        "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": [f"{prefix}\\..*"],
        "acl_sync": {"enabled": True, "write": "read", "groups": [f"{prefix}-g.*"],
                     "principals": {"c2": {"User:alice": "User:alice-eu"}}, "unmapped": {"c2": "keep"}}})
    secured.grant_acls(required_acls(topology, {n: principal_of(s) for n, s in settings.items()},
                                     roles=["source", "target"]))
    topic, group = f"{prefix}.orders", f"{prefix}-g1"
    _create(secured, "c1", {topic: 1})

    def binding(name, principal, operation, kind=ResourceType.TOPIC, pattern=ResourcePatternType.LITERAL,
                permission=AclPermissionType.ALLOW):
        return AclBinding(kind, name, pattern, principal, "*", operation, permission)

    alice = binding(topic, "User:alice", AclOperation.READ)
    secured.grant("c1", [alice, binding(f"{prefix}.", "User:bob", AclOperation.WRITE,
                                        pattern=ResourcePatternType.PREFIXED),
                         binding(group, "User:alice", AclOperation.READ, kind=ResourceType.GROUP),
                         binding(topic, "User:eve", AclOperation.READ, permission=AclPermissionType.DENY),
                         binding("unmirrored", "User:alice", AclOperation.READ)])
    on_c2 = f"eu-{topic}"
    secured.grant("c2", [binding(on_c2, "User:dave", AclOperation.READ)])  # nobody synced this one
    owner_before = _bindings(secured, "c1")
    caplog.set_level(logging.INFO)

    first = run_level(topology, 1, settings)
    assert first.ok, first.summary()["errors"]
    assert _bindings(secured, "c2") == {
        ("TOPIC", on_c2, "LITERAL", "User:alice-eu", "READ", "ALLOW"),
        ("TOPIC", f"eu-{prefix}.", "PREFIXED", "User:bob", "READ", "ALLOW"),    # WRITE arrives as READ
        ("GROUP", f"eu-{group}", "LITERAL", "User:alice-eu", "READ", "ALLOW"),
        ("TOPIC", on_c2, "LITERAL", "User:eve", "READ", "DENY"),
        ("TOPIC", on_c2, "LITERAL", "User:dave", "READ", "ALLOW"),             # left alone
    }
    (report,) = [r for r in first.links if r.target == "c2"]
    assert len(report.acls_created) == 4 and not report.acls_deleted and not report.acl_problems
    assert not [d for d in report.declined if prefix in d["subject"]]

    secured.revoke("c1", [AclBindingFilter(alice.restype, alice.name, alice.resource_pattern_type, alice.principal,
                                           alice.host, alice.operation, alice.permission_type)])
    second = run_level(topology, 1, settings)
    assert second.ok, second.summary()["errors"]
    held = _bindings(secured, "c2")
    assert ("TOPIC", on_c2, "LITERAL", "User:alice-eu", "READ", "ALLOW") not in held
    assert ("TOPIC", on_c2, "LITERAL", "User:dave", "READ", "ALLOW") in held and len(held) == 4
    (report,) = [r for r in second.links if r.target == "c2"]
    assert report.acls_deleted == [f"ALLOW User:alice-eu READ on TOPIC {on_c2!r} (literal) from *"]
    assert not report.acls_created

    third = run_level(topology, 1, settings)
    (report,) = [r for r in third.links if r.target == "c2"]
    assert third.ok and not report.acls_created and not report.acls_deleted  # only what differs, never the set
    assert _bindings(secured, "c1") == owner_before - {("TOPIC", topic, "LITERAL", "User:alice", "READ", "ALLOW")}
    events = [line for line in caplog.text.splitlines() if '"event":"acl_delete"' in line]
    assert len(events) == 1 and "User:alice-eu" in events[0] and '"owner":"c1"' in events[0]
    secured.revoke("c1", [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, p, None,
                                           AclOperation.ANY, AclPermissionType.ANY)
                          for p in ("User:alice", "User:bob", "User:eve")])
    secured.revoke("c2", [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, p, None,
                                           AclOperation.ANY, AclPermissionType.ANY)
                          for p in ("User:alice-eu", "User:bob", "User:eve", "User:dave")])


def test_acls_that_would_widen_or_wipe_access_are_declined_reported_and_the_copy_goes_on(mirrorflow_acls):
    """Issue 44's four ACL cases on the secured pair, mirrorflow holding exactly the derived ACLs, default
    ``acl_sync`` keys: a prefixed ALL grant on unmirrored topics, one on a prefix the topology does not mirror in
    full, a DENY for ``User:*`` and a DENY for an unmapped principal reach c2 neither; every one but the first
    (none of the sync's business) is reported in the run's ``declined``, naming the key that would allow it, and
    the copy to c2 goes on. Then the owner is emptied (rebuilt without its ACLs): the run deletes none of the
    grants mirrorflow made on c2, and says so."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    secured = mirrorflow_acls
    prefix = f"dn{uuid.uuid4().hex[:6]}"
    settings = {"c1": secured.scram("c1"), "c2": secured.mtls("c2")}
    topic, unmirrored, secret = f"{prefix}.orders", f"{prefix}.internal", f"{prefix}-team-secret.keys"
    topology = Topology.parse({
        "clusters": {n: {"bootstrap": s["bootstrap.servers"]} for n, s in settings.items()},
        "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": [f"{prefix}\\.orders"],
        "acl_sync": {"enabled": True, "principals": {"c2": {"User:alice": "User:alice-eu"}}}})
    secured.grant_acls(required_acls(topology, {n: principal_of(s) for n, s in settings.items()},
                                     roles=["source", "target"]))
    _create(secured, "c1", {topic: 1, unmirrored: 1, secret: 1})

    def binding(name, principal, operation, pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW):
        return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", operation, permission)

    travelling = [binding(topic, "User:alice", AclOperation.READ), binding(topic, "User:alice", AclOperation.WRITE)]
    team_secret = binding(f"{prefix}-team-secret.", "User:carol", AclOperation.ALL, ResourcePatternType.PREFIXED)
    wide = binding(f"{prefix}.", "User:carol", AclOperation.ALL, ResourcePatternType.PREFIXED)
    everyone = binding(topic, "User:*", AclOperation.WRITE, permission=AclPermissionType.DENY)
    bob = binding(topic, "User:bob", AclOperation.READ, permission=AclPermissionType.DENY)
    secured.grant("c1", [*travelling, team_secret, wide, everyone, bob])
    sent = traffic(secured.kafka, "c1", topic, 6)
    principals = ("User:alice", "User:alice-eu", "User:carol", "User:*", "User:bob")
    try:
        first = run_level(topology, 1, settings)
        assert first.ok, first.summary()["errors"]
        held = {b for b in _bindings(secured, "c2") if prefix in b[1]}
        assert held == {("TOPIC", topic, "LITERAL", "User:alice-eu", "READ", "ALLOW"),
                        ("TOPIC", topic, "LITERAL", "User:alice-eu", "WRITE", "ALLOW")}
        (report,) = [r for r in first.links if r.target == "c2"]
        assert report.copied == len(sent) and not report.acl_problems  # the DENY for User:* did not stop it
        mine = {d["subject"]: d for d in report.declined if prefix in d["subject"]}
        assert set(mine) == {f"ALLOW User:carol ALL on TOPIC {prefix + '.'!r} (prefixed) from *",
                             f"DENY User:* WRITE on TOPIC {topic!r} (literal) from *",
                             f"DENY User:bob READ on TOPIC {topic!r} (literal) from *"}, report.declined
        assert {d["allow"] for d in mine.values()} == {"", "acl_sync.unmapped.c2: keep"}
        assert all(d["area"] == "acl_sync" and d["cluster"] == "c2" and d["action"] == "create ACL"
                   for d in mine.values())

        # The owner rebuilt without its ACLs: nothing of it travels any more.
        secured.revoke("c1", [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, p, None,
                                               AclOperation.ANY, AclPermissionType.ANY) for p in principals])
        sent += traffic(secured.kafka, "c1", topic, 6, start=6)
        second = run_level(topology, 1, settings)
        assert second.ok, second.summary()["errors"]
        (report,) = [r for r in second.links if r.target == "c2"]
        assert not report.acls_deleted and report.copied == 6
        assert held <= _bindings(secured, "c2")  # every grant mirrorflow made is still there
        (wipe,) = [d for d in report.declined if d["action"].startswith("delete ")]
        assert wipe["allow"] == "acl_sync.max_delete_share" and "rebuilt" in wipe["reason"], wipe
        assert Counter(_values(secured.admin("c2"), [topic])) == Counter(sent)
    finally:
        for cluster in ("c1", "c2"):
            secured.revoke(cluster, [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, p, None,
                                                      AclOperation.ANY, AclPermissionType.ANY) for p in principals])
