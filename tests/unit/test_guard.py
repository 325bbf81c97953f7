"""The read-only guard (mirrorflow.cluster_sync.read_only_guard): which writers it denies, which it cannot; pure.

On secured clusters with the authorizer on: tests/integration/test_secured_refusals.py.
"""

from __future__ import annotations

import pytest

from mirrorflow.cluster_sync import Grant, GrantRules, covers, deny, plan_grants, plan_guard
from mirrorflow.errors import TopologyError
from mirrorflow.needed_acls import required_acls
from mirrorflow.topology import Topology
from tests.unit.grants import grant
from tests.unit.topologies import BASE

OWN = {"User:mirrorflow"}
TOPICS = ["orders", "payments.eu"]


def writes(name="orders", principal="User:app", pattern="LITERAL", operation="WRITE") -> Grant:
    return grant(name, principal, operation, pattern=pattern)


@pytest.mark.parametrize("binding, topic, applies", [
    (writes(), "orders", True),
    (writes(), "orders2", False),
    (writes("*"), "orders", True),
    (writes("pay", pattern="PREFIXED"), "payments.eu", True),
    (writes("pay", pattern="PREFIXED"), "orders", False),
    (grant("orders", kind="GROUP"), "orders", False),
])
def test_which_topics_a_binding_covers(binding, topic, applies):
    assert covers(binding, topic) is applies


def test_every_writer_of_a_mirrored_topic_is_denied_but_mirrorflow():
    have = [writes(), writes("pay", "User:billing", "PREFIXED"), writes("*", "User:ops", operation="ALL"),
            writes(principal="User:mirrorflow"), grant("orders", "User:reader"),          # reads only
            writes("inventory", "User:stock"),                                             # not mirrored
            grant("orders", "User:app", "WRITE", permission="DENY")]                       # a DENY already
    guard = plan_guard("c4", TOPICS, have, OWN)
    assert guard.denies == {deny("User:app", "orders"), deny("User:billing", "payments.eu"),
                            deny("User:ops", "orders"), deny("User:ops", "payments.eu")}
    assert all(g.permission == "DENY" and g.host == "*" and g.pattern_type == "LITERAL" for g in guard.denies)
    assert not guard.unguarded


def test_a_wildcard_writer_cannot_be_denied_and_is_named():
    guard = plan_guard("c4", TOPICS, [writes(principal="User:*")], OWN)
    assert not guard.denies
    (line,) = guard.unguarded
    assert "c4" in line and "User:*" in line and "'orders'" in line and "mirrorflow" in line


def test_lifted_topics_stay_open_and_say_for_which_groups():
    have = [writes(), writes("payments.eu")]
    guard = plan_guard("c4", TOPICS, have, OWN, lifted={"orders": frozenset({"billing-app"}),
                                                        "gone": frozenset({"x"})})
    assert guard.denies == {deny("User:app", "payments.eu")}
    assert guard.lifted == {"orders": frozenset({"billing-app"})}
    assert any("lifted by the failover of billing-app" in line for line in guard.explain())


def test_a_lifted_topic_loses_only_the_denies_the_guard_made():
    made = {deny("User:app", "orders")}
    by_hand = deny("User:intern", "orders")
    have = {writes(), *made, by_hand}
    closed = plan_guard("c4", ["orders"], have, OWN)
    assert plan_grants("c4", "guard", closed.denies, have, made).create == ()
    lifted = plan_guard("c4", ["orders"], have, OWN, lifted={"orders": frozenset({"g"})})
    opened = plan_grants("c4", "guard", lifted.denies, have, made)
    assert opened.delete == (deny("User:app", "orders"),) and by_hand not in opened.delete


def test_read_only_clusters_work_without_the_sync_and_name_their_acls():
    topology = Topology.parse({**BASE, "acl_sync": {"read_only": ["c4"]}})
    rules = topology.grant_rules()
    assert rules is not None and not rules.sync and rules.read_only == ("c4",)
    assert GrantRules.from_dict(rules.to_dict()) == rules
    acls = {(role, a.cluster, a.resource_type, a.name, a.operation) for a in required_acls(topology)
            for role in a.roles}
    for role in ("target", "failover"):
        assert (role, "c4", "CLUSTER", "kafka-cluster", "ALTER") in acls
        assert (role, "c4", "TOPIC", "_mirrorflow.acl-grants", "WRITE") in acls
    assert not {a for a in acls if a[2] == "CLUSTER" and a[4] in ("ALTER", "DESCRIBE") and a[1] != "c4"}
    assert topology.without_cluster("c4").grant_rules() is None


@pytest.mark.parametrize("section, where, says", [
    ({"read_only": ["c9"]}, "acl_sync.read_only[0]", "unknown cluster 'c9'"),
    ({"enabled": True, "read_only": ["c3", "c1"]}, "acl_sync.read_only[1]", "owner of the synced ACLs"),
])
def test_a_bad_read_only_list_is_refused_naming_the_entry(section, where, says):
    with pytest.raises(TopologyError) as caught:
        Topology.parse({**BASE, "acl_sync": section})
    assert where in str(caught.value) and says in str(caught.value)
