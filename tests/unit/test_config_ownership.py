"""Whose topic configs win (mirrorflow.cluster_sync.ownership) and how a plan follows them (plan_shape with owners).

Pure: no cluster. The real trees are in tests/integration/test_config_sync.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirrorflow.cluster_sync import ConfigOwnership, OwnedConfigs, decide, keeps_less, plan_shape, with_headroom
from mirrorflow.errors import TopologyError
from mirrorflow.kafka import TRAVELLING_CONFIGS, TopicShape
from mirrorflow.topology import Topology

RET = "retention.ms"
SEG = "segment.ms"
MAX = "max.message.bytes"


def shape(name: str, cluster: str, limit: int | None = None, **configs: str) -> TopicShape:
    return TopicShape(name, 1, {k.replace("_", "."): v for k, v in configs.items()}, cluster, max_message_bytes=limit)


def owned(target: str, owner_shapes: dict, records=None, **rules) -> OwnedConfigs:
    return OwnedConfigs(ConfigOwnership("c1", **rules), target, owner_shapes, records)


# --------------------------------------------------------------------------- decide


def test_a_follower_still_holding_what_was_applied_takes_the_owners_change_whatever_the_policy():
    record = {"owner": "c1", "applied": {RET: "1000"}, "local": {}}
    for policy in ("overwrite", "keep_target", "report_only"):
        verdict = decide("t", "c1", "c3", {RET: "2000"}, {RET: "1000"}, record, policy)
        (key,) = verdict.keys
        assert (key.action, key.why) == ("set", "owner_changed"), policy
        assert verdict.to_set == {RET: "2000"}
        assert "the owner changed it" in key.explain("t", "c1", "c3")


def test_a_value_changed_locally_is_overwritten_kept_or_reported_per_policy():
    record = {"owner": "c1", "applied": {RET: "1000"}, "local": {}}
    got = {p: decide("t", "c1", "c3", {RET: "1000"}, {RET: "5"}, record, p).keys[0]
           for p in ("overwrite", "keep_target", "report_only")}
    assert (got["overwrite"].action, got["overwrite"].why) == ("set", "local_overwritten")
    assert (got["keep_target"].action, got["keep_target"].why) == ("keep", "local_kept")
    assert (got["report_only"].action, got["report_only"].why) == ("report", "local_reported")
    assert "keep_target" in got["keep_target"].explain("t", "c1", "c3")


def test_a_kept_value_stays_kept_when_the_owner_changes_again_and_is_audited_once():
    first = decide("t", "c1", "c3", {RET: "1000"}, {RET: "5"}, {"owner": "c1", "applied": {RET: "1000"}},
                   "keep_target")
    assert [k.key for k in first.newly_local] == [RET]
    again = decide("t", "c1", "c3", {RET: "2000"}, {RET: "5"}, first.record(), "keep_target")
    assert again.keys[0].action == "keep" and not again.newly_local
    assert again.record() == {"owner": "c1", "applied": {RET: "2000"}, "local": {RET: "5"}}


def test_a_key_the_owner_drops_is_deleted_on_the_follower_and_one_it_adds_is_set():
    verdict = decide("t", "c1", "c3", {"segment.ms": "60000"}, {RET: "1000"}, {"owner": "c1", "applied": {RET: "1000"}},
                     "keep_target")
    assert verdict.to_set == {"segment.ms": "60000"} and verdict.to_delete == (RET,)
    assert all(k.why == "owner_changed" for k in verdict.keys)


def test_a_first_look_reports_only_then_a_value_the_follower_sets_is_its_own_and_one_it_lacks_arrives():
    for policy in ("overwrite", "keep_target", "report_only"):
        first = decide("t", "c1", "c3", {RET: "1000", SEG: "10"}, {RET: "5"}, None, policy)
        assert [(k.key, k.action, k.why) for k in first.keys] == [(RET, "report", "first_look"),
                                                                  (SEG, "report", "first_look")], policy
        assert not first.to_set and not first.to_delete
        assert "reported only, nothing changed" in first.keys[0].explain("t", "c1", "c3")
        second = decide("t", "c1", "c3", {RET: "1000", SEG: "10"}, {RET: "5"}, first.record(), policy)
        assert {k.key: k.why for k in second.keys} == {
            RET: {"overwrite": "local_overwritten", "keep_target": "local_kept",
                  "report_only": "local_reported"}[policy], SEG: "unset"}


# --------------------------------------------------------------------------- never keep less by default

DAY, WEEK, DAYS_90 = "86400000", "604800000", "7776000000"


def test_keeps_less_knows_unlimited_values_and_cleanup_policies_and_doubts_the_unknown():
    assert keeps_less(RET, DAYS_90, WEEK) and not keeps_less(RET, WEEK, DAYS_90)
    assert keeps_less(RET, "-1", DAYS_90) and not keeps_less(RET, DAYS_90, "-1")
    assert keeps_less("retention.bytes", "-1", "1000000")
    assert keeps_less("cleanup.policy", "compact", "compact,delete") and keeps_less("cleanup.policy", "delete",
                                                                                    "compact")
    assert not keeps_less("cleanup.policy", "compact,delete", "delete")
    assert keeps_less(RET, None, WEEK) and keeps_less(RET, "x", WEEK)  # unknown: doubted
    assert not keeps_less(SEG, "10", "1") and not keeps_less("max.message.bytes", "10", "1")


def test_a_followers_own_longer_retention_is_declined_not_removed_unless_allowed():
    record = {"owner": "c1", "applied": {}, "local": {}}
    defaults = {RET: WEEK, "cleanup.policy": "delete"}
    # c3 keeps orders 90 days, set there only; the owner leaves retention.ms to its broker (7 days)
    verdict = decide("orders", "c1", "c3", {}, {RET: DAYS_90}, record, "overwrite", defaults=defaults)
    (key,) = verdict.keys
    assert (key.action, key.why, key.change) == ("decline", "keeps_less", "remove retention.ms")
    assert not verdict.to_delete and verdict.local == {RET: DAYS_90}
    assert "keep less data: declined" in key.explain("orders", "c1", "c3")
    again = decide("orders", "c1", "c3", {}, {RET: DAYS_90}, verdict.record(), "overwrite", defaults=defaults)
    assert again.keys[0].action == "decline" and not again.newly_local  # every run declined, audited once
    allowed = decide("orders", "c1", "c3", {}, {RET: DAYS_90}, record, "overwrite", defaults=defaults,
                     allow_keeping_less=frozenset({RET}))
    assert allowed.to_delete == (RET,)
    # a longer value of the owner's is no loss: it travels
    assert decide("orders", "c1", "c3", {RET: DAYS_90}, {RET: WEEK}, record, "overwrite").to_set == {RET: DAYS_90}
    # a key the follower left to a longer broker default when first seen: the owner's shorter value keeps less
    first = decide("orders", "c1", "c3", {RET: DAY}, {}, None, "overwrite", defaults=defaults)
    assert decide("orders", "c1", "c3", {RET: DAY}, {}, first.record(), "overwrite",
                  defaults=defaults).keys[0].action == "decline"
    # ... while a key both left to their brokers when last seen follows the owner's change: it is the owner's
    assert decide("orders", "c1", "c3", {RET: DAY}, {}, record, "overwrite", defaults=defaults).to_set == {RET: DAY}
    # a cleanup policy gaining compact is a loss too
    assert decide("orders", "c1", "c3", {"cleanup.policy": "compact"}, {"cleanup.policy": "delete"}, record,
                  "overwrite").keys[0].action == "decline"


def test_the_owners_own_shorter_retention_still_reaches_a_follower_that_held_its_previous_value():
    record = {"owner": "c1", "applied": {RET: DAYS_90}, "local": {}}
    verdict = decide("orders", "c1", "c3", {RET: WEEK}, {RET: DAYS_90}, record, "overwrite",
                     defaults={RET: WEEK})
    assert [(k.action, k.why) for k in verdict.keys] == [("set", "owner_changed")]
    assert verdict.to_set == {RET: WEEK}


def test_a_record_of_another_owner_proves_nothing_the_run_reports_only_and_starts_again():
    record = {"owner": "c2", "applied": {RET: DAYS_90}, "local": {}}
    verdict = decide("orders", "c1", "c3", {RET: WEEK}, {RET: DAYS_90}, record, "overwrite")
    (key,) = verdict.keys
    assert (key.action, key.why) == ("report", "owner_moved") and not verdict.to_set
    assert "owner changed from c2 to c1" in key.explain("orders", "c1", "c3")
    assert verdict.record() == {"owner": "c1", "applied": {RET: WEEK}, "local": {RET: DAYS_90}}
    nxt = decide("orders", "c1", "c3", {RET: WEEK}, {RET: DAYS_90}, verdict.record(), "overwrite")
    assert nxt.keys[0].action == "decline"  # from then on c3's 90 days are its own: never shortened


values = st.dictionaries(st.sampled_from(sorted(TRAVELLING_CONFIGS - {MAX})), st.sampled_from(["1", "2", "3"]),
                         max_size=4)


@given(owner=values, follower=values, applied=values, policy=st.sampled_from(["overwrite", "keep_target",
                                                                             "report_only"]))
def test_after_applying_a_verdict_the_follower_equals_the_owner_except_what_it_keeps(owner, follower, applied,
                                                                                     policy):
    verdict = decide("t", "c1", "c3", owner, follower, {"owner": "c1", "applied": applied}, policy)
    after = {**follower, **verdict.to_set}
    for key in verdict.to_delete:
        after.pop(key)
    kept = {k.key for k in verdict.keys if not k.applies}
    assert {k: v for k, v in after.items() if k not in kept} == {k: v for k, v in owner.items() if k not in kept}
    # and the next run, from the record just made, changes nothing more: nothing flips back
    again = decide("t", "c1", "c3", owner, after, verdict.record(), policy)
    assert not again.to_set and not again.to_delete


def test_the_first_matching_pattern_owns_a_topic_and_the_default_owns_the_rest():
    ownership = ConfigOwnership("c1", owners=(("pay.*", "c3"), ("payments", "c2")))
    assert ownership.owner_of("payments") == "c3" and ownership.owner_of("orders") == "c1"
    assert ownership.owner_of("xpay") == "c1"  # a full match
    assert ConfigOwnership.from_dict(ownership.to_dict()) == ownership
    with pytest.raises(ValueError, match="on_local_change must be one of"):
        ConfigOwnership("c1", on_local_change="win")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- plan_shape with owners


def test_a_follower_is_aligned_with_the_owner_not_with_the_links_source():
    source = {"t": shape("t", "c2", 1048588, retention_ms="5")}  # a follower as the link's source
    target = {"t": shape("t", "c3", 1053783, retention_ms="5", max_message_bytes="1053783")}
    owner = {"t": shape("t", "c1", 5242880, retention_ms="1000", max_message_bytes="5242880")}
    record = {"t": {"owner": "c1", "applied": {}, "local": {}}}
    plan = plan_shape(source, target, owned=owned("c3", owner, record))
    (align,) = plan.align
    assert align.set == {RET: "1000", MAX: str(with_headroom(5242880))}
    assert {(d.key, d.source, d.owner) for d in plan.drift} == {(RET, "1000", "c1"), (MAX, "5248087", "c1")}
    assert plan.limits["t"][0] == with_headroom(5242880)


def test_the_owner_is_never_aligned_nor_reported_whatever_its_sources_hold():
    source = {"t": shape("t", "c2", retention_ms="5")}
    target = {"t": shape("t", "c1", retention_ms="1000")}
    plan = plan_shape(source, target, owned=owned("c1", {}))
    assert plan.is_empty and not plan.verdicts


def test_a_topic_created_on_a_follower_gets_the_owners_configs_and_a_record_where_one_is_kept():
    source = {"t": shape("t", "c2", 1048588, retention_ms="5")}
    owner = {"t": shape("t", "c1", 1048588, retention_ms="1000", min_insync_replicas="2")}
    plan = plan_shape(source, {}, owned=owned("c3", owner, exclude=frozenset({"segment.ms"})))
    (create,) = plan.create
    assert create.configs == {RET: "1000", MAX: str(with_headroom(1048588))}
    assert plan.records["t"] == {"owner": "c1", "applied": create.configs, "local": {}}


def test_excluded_keys_are_neither_compared_nor_copied():
    source = {"t": shape("t", "c1", retention_ms="1000", segment_ms="10")}
    target = {"t": shape("t", "c3", segment_ms="99")}
    plan = plan_shape(source, target, owned=owned("c3", source, exclude=frozenset({"segment.ms", RET})))
    assert plan.is_empty
    assert plan_shape(source, {}, owned=owned("c3", source, exclude=frozenset({"segment.ms"}))).create[0].configs \
        == {RET: "1000"}


def test_a_topic_its_owner_lacks_is_compared_with_the_source_and_only_reported():
    source = {"t": shape("t", "c2", retention_ms="5")}
    target = {"t": shape("t", "c3", retention_ms="7")}
    plan = plan_shape(source, target, owned=owned("c3", {}))
    assert not plan.align and [(d.key, d.source, d.owner) for d in plan.drift] == [(RET, "5", "")]


@pytest.mark.parametrize("policy", ["overwrite", "keep_target"])
def test_a_baseline_is_written_for_a_follower_in_step_under_every_policy(policy):
    source = target = {"t": shape("t", "c3", retention_ms="1000")}
    owner = {"t": shape("t", "c1", retention_ms="1000")}
    plan = plan_shape(source, target, owned=owned("c3", owner, {}, on_local_change=policy))
    assert plan.is_empty and plan.records == {"t": {"owner": "c1", "applied": {RET: "1000"}, "local": {}}}
    recorded = plan_shape(source, target, owned=owned("c3", owner, plan.records, on_local_change=policy))
    assert recorded.records == {}  # up to date: nothing to write


# --------------------------------------------------------------------------- the topology key


BASE = {"clusters": {c: {"bootstrap": f"127.0.0.1:{9000 + i}"} for i, c in enumerate(["c1", "c2", "c3", "c4"])},
        "tree": {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]},
                                          {"level": 1, "children": ["c3", "c4"]}]},
        "topics": ["orders", "payments\\..*"]}


def test_by_default_the_first_cluster_listed_owns_every_topics_configs():
    ownership = Topology.parse(BASE).config_ownership()
    assert ownership == ConfigOwnership("c1")
    data = {**BASE, "clusters": dict(reversed(list(BASE["clusters"].items())))}
    assert Topology.parse(data).config_ownership().default_owner == "c4"
    assert Topology.parse({**BASE, "topic_configs": {"sync": False}}).config_ownership() is None


def test_the_topology_names_owners_exclusions_and_the_policy():
    topo = Topology.parse({**BASE, "topic_configs": {"owner": "c2", "owners": {"payments\\..*": "c3"},
                                                     "exclude": ["retention.bytes"],
                                                     "on_local_change": "keep_target"}})
    ownership = topo.config_ownership()
    assert ownership.allow_keeping_less == frozenset()  # by default nothing may make a follower keep less
    assert ownership.owner_of("payments.eu") == "c3" and ownership.owner_of("orders") == "c2"
    assert ownership.exclude == {"retention.bytes"} and ownership.on_local_change == "keep_target"
    assert Topology.parse(topo.to_dict()).config_ownership() == ownership


@pytest.mark.parametrize("section, where, says", [
    ({"owner": "c9"}, "topic_configs.owner", "unknown cluster 'c9'"),
    ({"owners": {"orders": "c9"}}, "topic_configs.owners.orders", "unknown cluster 'c9'"),
    ({"owners": {"(": "c1"}}, "topic_configs.owners", "bad regular expression"),
    ({"exclude": ["min.insync.replicas"]}, "topic_configs.exclude", "is not a config that travels"),
    ({"on_local_change": "win"}, "topic_configs.on_local_change", "overwrite"),
    ({"owner": "c1", "sync": "yes"}, "topic_configs.sync", "expected true or false"),
    ({"allow_keeping_less": ["segment.ms"]}, "topic_configs.allow_keeping_less", "needs no permission"),
])
def test_a_bad_topic_configs_section_is_refused_naming_the_key(section, where, says):
    with pytest.raises(TopologyError) as caught:
        Topology.parse({**BASE, "topic_configs": section})
    assert where in str(caught.value) and says in str(caught.value)


def test_a_cluster_that_owns_configs_cannot_be_removed_before_another_is_named():
    topo = Topology.parse({**BASE, "topic_configs": {"owners": {"orders": "c3"}}})
    with pytest.raises(TopologyError, match="topic_configs.owners.orders.*owns topic configs"):
        topo.without_cluster("c3")


def test_allow_keeping_less_names_keys_or_all_of_them():
    some = Topology.parse({**BASE, "topic_configs": {"allow_keeping_less": ["retention.ms"]}})
    assert some.config_ownership().allow_keeping_less == {"retention.ms"}
    every = Topology.parse({**BASE, "topic_configs": {"allow_keeping_less": True}})
    assert every.config_ownership().allow_keeping_less == {"retention.ms", "retention.bytes", "cleanup.policy"}
    assert Topology.parse(every.to_dict()).config_ownership() == every.config_ownership()
