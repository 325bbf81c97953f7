"""Which topic ACLs travel, as what, and which go (mirrorflow.cluster_sync.acl_plan): pure, no cluster.

On secured clusters with the authorizer on: tests/integration/test_secured_refusals.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirrorflow.cluster_sync import Grant, GrantRules, arrival, as_on, mirrors_every, plan_grants, select, travels
from mirrorflow.cluster_sync.acl_sync import declined
from mirrorflow.declined import Declined
from mirrorflow.errors import TopologyError
from mirrorflow.topology import Topology
from tests.unit.grants import grant
from tests.unit.topologies import BASE

RULES = GrantRules(owner="c1", topics=("orders", "payments\\..*"), groups=("billing-.*",),
                   principals={"c3": {"User:alice": "User:alice-eu"}})


@pytest.mark.parametrize("binding, goes", [
    (grant(), True),
    (grant("inventory"), False),                                   # not mirrored
    (grant("payments.", pattern="PREFIXED"), True),                # covers payments.eu on the owner
    (grant("pay", pattern="PREFIXED"), False),                     # covers payments.eu, and pay-anything too
    (grant("zzz", pattern="PREFIXED"), False),                     # covers no mirrored topic
    (grant("*"), False),                                           # every topic, mirrored or not
    (grant("_mirrorflow.offsets"), False),                         # internal
    (grant(principal="User:mirrorflow"), False),                   # mirrorflow's own
    (grant("billing-eu", kind="GROUP"), True),
    (grant("billing-", kind="GROUP", pattern="PREFIXED"), True),
    (grant("billing-eu", kind="GROUP", pattern="PREFIXED"), True),  # billing-eu* are all billing-*
    (grant("orders-app", kind="GROUP"), False),                    # a group the topology does not name
    (grant("_mirrorflow.link.c1.L1", kind="GROUP"), False),
    (grant(operation="WRITE", permission="DENY"), True),
])
def test_which_of_the_owners_bindings_travel(binding, goes):
    assert travels(binding, RULES, ["orders", "payments.eu", "inventory"], {"User:mirrorflow"}) is goes


OWNER_TOPICS = ["orders", "orders-audit", "payments.eu", "team-secret.keys", "_schemas", "__consumer_offsets"]


def test_a_prefix_travels_only_when_the_topology_mirrors_every_name_it_covers():
    """Issue 44: the owner's prefixed ALL on ``team-secret.`` travelled because the owner had some topic under it,
    mirrored or not. A prefix is judged by the topology, not by the topics mirrorflow can see: with least
    privilege it sees only the mirrored ones, and a prefix covers topics made later, on any cluster."""
    secret = grant("team-secret.", operation="ALL", pattern="PREFIXED")
    assert not travels(secret, RULES, OWNER_TOPICS, ())
    chosen = select([secret], RULES, OWNER_TOPICS, ())
    assert not chosen.travel and not chosen.refused  # about no mirrored topic: none of the sync's business

    wide = grant("orders", pattern="PREFIXED")  # orders and orders-audit; only orders is mirrored
    chosen = select([wide], RULES, OWNER_TOPICS, ())
    (refusal,) = chosen.refused
    assert not chosen.travel and refusal.allow == ""
    assert "'orders-audit'" in refusal.reason and "literal" in refusal.reason
    assert not travels(wide, RULES, ["orders"], ())  # unseen (least privilege) is not proof
    assert travels(grant("payments.", pattern="PREFIXED"), RULES, OWNER_TOPICS, ())
    assert travels(grant("payments.e", pattern="PREFIXED"), RULES, OWNER_TOPICS, ())


@pytest.mark.parametrize("prefix, patterns, every", [
    ("payments.", ["payments\\..*"], True),
    ("payments.eu", ["payments\\..*"], True),
    ("payments", ["payments\\..*"], False),      # payments-x too
    ("orders", ["orders"], False),
    ("orders", ["orders.*"], True),
    ("a", [".*"], True),
    ("_", [".*"], False),                         # __consumer_offsets, _schemas, _mirrorflow*
    ("_mirror", [".*"], False),
    ("a.b", ["a.b.*"], False),                    # the head's '.' is any character: not a plain name
    ("x", ["(x|y).*"], False),                    # not of the form Q.* (sound, not complete)
])
def test_which_prefixes_a_topology_mirrors_in_full(prefix, patterns, every):
    assert mirrors_every(prefix, patterns) is every


@pytest.mark.parametrize("principal", ["User:*", "Group:*", "*"])
@pytest.mark.parametrize("permission", ["DENY", "ALLOW"])
def test_a_wildcard_principal_never_travels_and_is_reported(principal, permission):
    """A DENY for ``User:*`` on the followers would deny mirrorflow's own principal too."""
    everyone = grant(principal=principal, operation="WRITE", permission=permission)
    chosen = select([everyone], RULES, OWNER_TOPICS, ["User:mirrorflow"])
    assert not chosen.travel
    (refusal,) = chosen.refused
    assert refusal.allow == "" and "every principal" in refusal.reason


def test_the_wildcard_topic_is_reported_not_silently_skipped():
    (refusal,) = select([grant("*")], RULES, OWNER_TOPICS, ()).refused
    assert "every topic" in refusal.reason and refusal.allow == ""


def test_an_unmapped_principal_travels_only_where_the_map_says_the_names_are_the_same():
    """A deny for ``User:bob`` lands where he is ``User:bob-eu``, and nothing is denied: so by default an
    unmapped principal goes nowhere, reported, with the key that lets it."""
    bob = grant(principal="User:bob", operation="WRITE", permission="DENY")
    alice = grant()
    travel = select([bob, alice], RULES, OWNER_TOPICS, ()).travel
    on_c2 = arrival("c2", travel, RULES, "User:mirrorflow")
    assert not on_c2.wanted
    assert {r.grant.principal for r in on_c2.refused} == {"User:bob", "User:alice"}
    assert all(r.allow == "acl_sync.unmapped.c2: keep" and "acl_sync.principals.c2" in r.reason
               for r in on_c2.refused)
    on_c3 = arrival("c3", travel, RULES, "User:mirrorflow")  # alice is mapped there, bob is not
    assert on_c3.wanted == {as_on(alice, RULES, "c3")} and [r.grant for r in on_c3.refused] == [bob]

    same = GrantRules.from_dict({**RULES.to_dict(), "unmapped": {"c2": "keep"}})
    assert arrival("c2", travel, same, "User:mirrorflow").wanted == {alice, bob}
    assert [r.grant for r in arrival("c3", travel, same, "User:mirrorflow").refused] == [bob]


def test_a_grant_mapped_onto_mirrorflows_own_principal_is_reported():
    rules = GrantRules("c1", ("orders",), principals={"c2": {"User:ops": "User:mirrorflow"}})
    deny = grant(principal="User:ops", operation="WRITE", permission="DENY")
    on_c2 = arrival("c2", [deny], rules, "User:mirrorflow")
    assert not on_c2.wanted and "mirrorflow's own principal" in on_c2.refused[0].reason


def test_a_run_that_would_delete_more_than_the_share_deletes_none_and_says_so():
    """An owner rebuilt without its ACLs lists none: the plan would delete every grant mirrorflow made."""
    made = {grant(principal=f"User:{n}") for n in "abcd"}
    emptied = plan_grants("c2", "c1", wanted=set(), have=made, made=made, max_delete_share=0.5)
    assert not emptied.delete and set(emptied.withheld) == made and emptied.made == made
    reason = emptied.withheld_reason()
    assert "4 of the 4 grants" in reason and "acl_sync.max_delete_share (0.5)" in reason and "rebuilt" in reason
    assert any("none is deleted" in line for line in emptied.explain())

    one_gone = plan_grants("c2", "c1", wanted=made - {grant(principal="User:a")}, have=made, made=made,
                           max_delete_share=0.5)
    assert one_gone.delete == (grant(principal="User:a"),) and not one_gone.withheld
    half = plan_grants("c2", "c1", wanted={grant(principal="User:a"), grant(principal="User:b")}, have=made,
                       made=made, max_delete_share=0.5)
    assert len(half.delete) == 2 and not half.withheld  # at most the share: allowed
    assert plan_grants("c2", "c1", set(), made, made, max_delete_share=1.0).delete == tuple(sorted(made))
    assert not plan_grants("c2", "c1", set(), made, made, max_delete_share=0.0).delete
    assert plan_grants("c2", "c1", set(), made, made).delete == tuple(sorted(made))  # the guard: no bound


@given(wanted=st.sets(st.builds(lambda p: grant(principal=p), st.sampled_from([f"User:{n}" for n in "abcdef"]))),
       made=st.sets(st.builds(lambda p: grant(principal=p), st.sampled_from([f"User:{n}" for n in "abcdef"]))),
       share=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]))
def test_no_plan_deletes_more_than_its_share_of_mirrorflows_grants(wanted, made, share):
    plan = plan_grants("c2", "c1", wanted, made, made, max_delete_share=share)
    assert len(plan.delete) <= share * len(made)
    assert not plan.delete or not plan.withheld
    assert set(plan.delete) | set(plan.withheld) == made - wanted


def test_what_is_declined_reaches_the_shared_record_once_per_binding():
    """Each refused binding the cluster lacks, plus one record for the held-back deletions, allow keys named."""
    everyone = grant(principal="User:*", operation="WRITE", permission="DENY")
    bob = grant(principal="User:bob")
    hand = grant(principal="User:carol")  # refused, but the cluster has it already (made by hand): nothing to say
    travel = select([everyone, bob, hand], RULES, OWNER_TOPICS, ())
    arrived = arrival("c2", travel.travel, RULES, "User:mirrorflow")
    made = {grant(principal="User:old")}
    plan = plan_grants("c2", "c1", arrived.wanted, made | {hand}, made, RULES.max_delete_share)
    records = declined("c2", [*travel.refused, *arrived.refused], plan, made | {hand})
    assert [(d.subject, d.action, d.allow) for d in records] == [
        (str(everyone), "create ACL", ""),
        (str(bob), "create ACL", "acl_sync.unmapped.c2: keep"),
        ("the ACL grants mirrorflow made", "delete 1 grants", "acl_sync.max_delete_share"),
    ]
    assert all(d.area == "acl_sync" and d.cluster == "c2" for d in records)
    assert Declined.from_dict(records[0].to_dict()) == records[0]
    assert "declined on c2" in records[0].to_dict()["message"]


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


def test_acl_sync_is_off_by_default_and_its_owner_defaults_to_the_config_owner():
    assert Topology.parse(BASE).grant_rules() is None
    rules = Topology.parse({**BASE, "topic_configs": {"owner": "c2"}, "acl_sync": {"enabled": True}}).grant_rules()
    assert rules is not None and rules.owner == "c2" and rules.write == "keep" and rules.topics == ("orders",)
    assert GrantRules.from_dict(rules.to_dict()) == rules
    # a file (and a job spec) written before unmapped and max_delete_share loads, with the safe defaults
    assert rules.unmapped == {} and rules.max_delete_share == 0.5
    old_spec = {k: v for k, v in rules.to_dict().items() if k not in ("unmapped", "max_delete_share")}
    assert GrantRules.from_dict(old_spec) == rules
    both = Topology.parse({**BASE, "acl_sync": {"enabled": True, "unmapped": {"c3": "keep"},
                                                "max_delete_share": 1}}).grant_rules()
    assert both is not None and both.unmapped == {"c3": "keep"} and both.max_delete_share == 1.0
    assert GrantRules.from_dict(both.to_dict()) == both


@pytest.mark.parametrize("section, where, says", [
    ({"enabled": True, "owner": "c9"}, "acl_sync.owner", "unknown cluster 'c9'"),
    ({"principals": {"c9": {"User:a": "User:b"}}}, "acl_sync.principals.c9", "unknown cluster"),
    ({"principals": {"c3": {"alice": "User:b"}}}, "acl_sync.principals", "c3: a principal is TYPE:NAME (User:alice), "
                                                                         "got 'alice'"),
    ({"write": "all"}, "acl_sync.write", "keep"),
    ({"groups": ["("]}, "acl_sync.groups", "bad regular expression"),
    ({"unmapped": {"c9": "keep"}}, "acl_sync.unmapped.c9", "unknown cluster"),
    ({"unmapped": {"c2": "same"}}, "acl_sync.unmapped.c2", "keep"),
    ({"unmapped": "keep"}, "acl_sync.unmapped", "expected a mapping"),
    ({"max_delete_share": 1.5}, "acl_sync.max_delete_share", "less than or equal to 1"),
    ({"max_delete_share": "half"}, "acl_sync.max_delete_share", ""),
    ({"principals": {"c3": {"User:*": "User:all-eu"}}}, "acl_sync.principals", "c3: 'User:*' is every principal"),
])
def test_a_bad_acl_sync_section_is_refused_naming_the_key(section, where, says):
    with pytest.raises(TopologyError) as caught:
        Topology.parse({**BASE, "acl_sync": section})
    assert where in str(caught.value) and says in str(caught.value)


# --------------------------------------------------------------------------- names per cluster

NAMED = GrantRules(owner="c1", topics=("orders", "payments\\..*"), groups=("billing-.*",), unmapped={"c2": "keep",
                                                                                                  "c3": "keep"},
                   topic_names={"c1": {"template": "acme-prod-{topic}", "prefix": "acme-prod-", "suffix": ""},
                                "c3": {"template": "{topic}.eu", "prefix": "", "suffix": ".eu"}},
                   group_names={"c2": {"template": "eu.{group}", "prefix": "eu.", "suffix": ""}})


def test_a_binding_travels_between_clusters_that_name_topics_and_groups_their_own_ways():
    """The owner's names are read back to logical ones, then said as each cluster says them; what cannot be said
    there (a prefix under names with a suffix, a prefix wider than the owner's names) is declined, with why."""
    owner_topics = ["acme-prod-orders", "acme-prod-payments.eu", "inventory"]
    bindings = [grant("acme-prod-orders"), grant("acme-prod-payments.", pattern="PREFIXED", operation="WRITE"),
                grant("billing-eu", kind="GROUP"), grant("acme-", pattern="PREFIXED"),
                grant("orders"), grant("inventory")]  # c1's own topics outside its names: none of the sync's business
    chosen = select(bindings, NAMED, owner_topics, ())
    assert chosen.travel == {grant("orders"), grant("payments.", pattern="PREFIXED", operation="WRITE"),
                             grant("billing-eu", kind="GROUP")}
    (wide,) = chosen.refused
    assert wide.grant == grant("acme-", pattern="PREFIXED") and "wider than the names" in wide.reason
    # c2 keeps topic names and prefixes groups; c3 puts a suffix on topics, so a prefix cannot be said there
    on_c2 = arrival("c2", chosen.travel, NAMED, None)
    assert on_c2.wanted == {grant("orders"), grant("payments.", pattern="PREFIXED", operation="WRITE"),
                            grant("eu.billing-eu", kind="GROUP")} and not on_c2.refused
    on_c3 = arrival("c3", chosen.travel, NAMED, None)
    assert on_c3.wanted == {grant("orders.eu"), grant("billing-eu", kind="GROUP")}
    (suffixed,) = on_c3.refused
    assert suffixed.grant.name == "payments." and "suffix '.eu'" in suffixed.reason
    assert GrantRules.from_dict(NAMED.to_dict()) == NAMED  # the level job's spec carries the formats
    unrelated = select([grant("inv", pattern="PREFIXED"), grant("a", pattern="PREFIXED", principal="User:x")],
                       NAMED, owner_topics, ())
    assert not unrelated.travel and [r.grant.name for r in unrelated.refused] == ["a"]  # 'a' covers acme-prod-*

