"""Which topic ACLs travel, as what, and which go (mirrorflow.kafka.grants): pure, no cluster.

On secured clusters with the authorizer on: tests/integration/test_secured_refusals.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirrorflow.errors import TopologyError
from mirrorflow.kafka.grants import Grant, GrantRules, as_on, plan_grants, travels
from mirrorflow.topology import Topology

RULES = GrantRules(owner="c1", topics=("orders", "payments\\..*"), groups=("billing-.*",),
                   principals={"c3": {"User:alice": "User:alice-eu"}})


def grant(name="orders", principal="User:alice", operation="READ", kind="TOPIC", pattern="LITERAL",
          permission="ALLOW") -> Grant:
    return Grant(kind, name, pattern, principal, "*", operation, permission)


@pytest.mark.parametrize("binding, goes", [
    (grant(), True),
    (grant("inventory"), False),                                   # not mirrored
    (grant("payments.", pattern="PREFIXED"), True),                # covers payments.eu on the owner
    (grant("pay", pattern="PREFIXED"), True),
    (grant("zzz", pattern="PREFIXED"), False),                     # covers no mirrored topic
    (grant("*"), False),                                           # every topic, mirrored or not
    (grant("_mirrorflow.offsets"), False),                         # internal
    (grant(principal="User:mirrorflow"), False),                   # mirrorflow's own
    (grant("billing-eu", kind="GROUP"), True),
    (grant("billing-", kind="GROUP", pattern="PREFIXED"), True),
    (grant("orders-app", kind="GROUP"), False),                    # a group the topology does not name
    (grant("_mirrorflow.link.c1.L1", kind="GROUP"), False),
    (grant(operation="WRITE", permission="DENY"), True),
])
def test_which_of_the_owners_bindings_travel(binding, goes):
    assert travels(binding, RULES, ["orders", "payments.eu", "inventory"], {"User:mirrorflow"}) is goes


def test_a_principal_is_named_as_each_cluster_knows_it_and_write_follows_the_rule():
    assert as_on(grant(), RULES, "c3").principal == "User:alice-eu"
    assert as_on(grant(), RULES, "c2").principal == "User:alice"
    read_only = GrantRules("c1", ("orders",), write="read")
    assert as_on(grant(operation="WRITE"), read_only, "c2").operation == "READ"
    assert as_on(grant(operation="ALL"), read_only, "c2").operation == "READ"
    assert as_on(grant(operation="WRITE", permission="DENY"), read_only, "c2").operation == "WRITE"  # a deny stays
    assert as_on(grant(operation="WRITE"), RULES, "c2").operation == "WRITE"  # keep


def test_only_what_differs_is_created_and_only_what_mirrorflow_made_is_deleted():
    a, b, c, d = (grant(principal=f"User:{n}") for n in "abcd")
    plan = plan_grants("c2", "c1", wanted={a, b}, have={b, c, d}, made={b, c})
    assert plan.create == (a,)      # b is there already
    assert plan.delete == (c,)      # made by mirrorflow, gone from the owner; d was made by hand: left alone
    assert plan.made == {a, b}
    assert any("delete" in line and "User:c" in line for line in plan.explain())


def test_a_grant_someone_else_made_is_never_recorded_nor_deleted():
    a = grant()
    plan = plan_grants("c2", "c1", wanted={a}, have={a}, made=set())
    assert not plan.create and not plan.delete and plan.found == (a,) and plan.made == set()
    later = plan_grants("c2", "c1", wanted=set(), have={a}, made=plan.made)
    assert not later.delete


grants = st.sets(st.builds(grant, principal=st.sampled_from(["User:a", "User:b", "User:c"]),
                           operation=st.sampled_from(["READ", "WRITE"])), max_size=4)


@given(wanted=grants, have=grants, made=grants)
def test_after_a_plan_the_cluster_holds_what_is_wanted_and_a_second_plan_does_nothing(wanted, have, made):
    plan = plan_grants("c2", "c1", wanted, have, made)
    after = (set(have) - set(plan.delete)) | set(plan.create)
    assert set(wanted) <= after
    assert not (after - set(wanted)) & plan.made  # nothing mirrorflow made is left once unwanted
    again = plan_grants("c2", "c1", wanted, after, plan.made)
    assert not again.create and not again.delete


def test_a_binding_keeps_its_identity_through_its_record_key():
    assert Grant.from_key(grant("payments.", pattern="PREFIXED").key()) == grant("payments.", pattern="PREFIXED")
    assert str(grant()) == "ALLOW User:alice READ on TOPIC 'orders' (literal) from *"


BASE = {"clusters": {c: {"bootstrap": f"127.0.0.1:{9000 + i}"} for i, c in enumerate(["c1", "c2", "c3", "c4"])},
        "tree": {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]},
                                          {"level": 1, "children": ["c3", "c4"]}]},
        "topics": ["orders"]}


def test_acl_sync_is_off_by_default_and_its_owner_defaults_to_the_config_owner():
    assert Topology.parse(BASE).grant_rules() is None
    rules = Topology.parse({**BASE, "topic_configs": {"owner": "c2"}, "acl_sync": {"enabled": True}}).grant_rules()
    assert rules is not None and rules.owner == "c2" and rules.write == "keep" and rules.topics == ("orders",)
    assert GrantRules.from_dict(rules.to_dict()) == rules


@pytest.mark.parametrize("section, where, says", [
    ({"enabled": True, "owner": "c9"}, "acl_sync.owner", "unknown cluster 'c9'"),
    ({"principals": {"c9": {"User:a": "User:b"}}}, "acl_sync.principals.c9", "unknown cluster"),
    ({"principals": {"c3": {"alice": "User:b"}}}, "acl_sync.principals", "TYPE:NAME"),
    ({"write": "all"}, "acl_sync.write", "keep"),
    ({"groups": ["("]}, "acl_sync.groups", "bad regular expression"),
])
def test_a_bad_acl_sync_section_is_refused_naming_the_key(section, where, says):
    with pytest.raises(TopologyError) as caught:
        Topology.parse({**BASE, "acl_sync": section})
    assert where in str(caught.value) and says in str(caught.value)
