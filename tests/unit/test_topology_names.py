"""A cluster's names in the topology (include/mirrorflow/topology/names.py): formats, prefixes, refusals by key."""

from __future__ import annotations

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.topology import Topology


def _topology(**names) -> Topology:
    return Topology.parse({
        "clusters": {"c1": {"bootstrap": "a:1", **({"names": names} if names else {})}, "c2": {"bootstrap": "b:1"}},
        "tree": {"level": 1, "children": ["c1", "c2"]},
        "topics": ["orders.*"],
    })


def test_a_cluster_without_names_keeps_the_logical_ones():
    topology = _topology()
    assert topology.topic_naming("c1").is_identity and topology.group_naming("c1").is_identity
    assert not topology.cluster("c1").names.renames


def test_a_format_and_a_prefix_name_topics_groups_and_by_default_subjects():
    topology = _topology(topics="{tenant}-{environment}-{topic}", group_prefix="acme.",
                         values={"tenant": "acme", "environment": "prod"})
    assert topology.topic_naming("c1").render("orders") == "acme-prod-orders"
    assert topology.group_naming("c1").render("billing") == "acme.billing"
    assert topology.subject_naming("c1").render("orders-value") == "acme-prod-orders-value"
    assert topology.topic_naming("c2").render("orders") == "orders"


def test_an_explicit_subject_format_wins_over_the_topic_names():
    data = {"clusters": {"c1": {"bootstrap": "a:1", "names": {"topic_prefix": "acme-"}}, "c2": {"bootstrap": "b:1"}},
            "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": ["orders"],
            "schemas": {"primary": "c1", "clusters": {"c1": {"subject_format": "{topic}"}}}}
    assert Topology.parse(data).subject_naming("c1").is_identity


@pytest.mark.parametrize(("names", "problem"), [
    ({"topics": "{tenant}-{topic}", "topic_prefix": "x-"}, "clusters.c1.names: give topics or topic_prefix, not both"),
    ({"groups": "{tenant}.{topic}", "values": {"tenant": "a"}},
     "clusters.c1.names: groups: {group} must occur exactly once"),
    ({"topics": "{tenant}-{topic}"}, "clusters.c1.names: topics: no value for {tenant}"),
    ({"topic_prefix": "acme/"}, "clusters.c1.names: topic_prefix: 'acme/{topic}' puts '/' in topic names"),
    ({"topic_prefix": "{tenant}-"}, "clusters.c1.names: topic_prefix is a plain prefix"),
    ({"topic_sufix": "-x"}, "clusters.c1.names.topic_sufix"),
])
def test_a_bad_names_section_is_refused_naming_the_key(names, problem):
    with pytest.raises(TopologyError) as err:
        _topology(**names)
    assert problem in str(err.value), str(err.value)


def test_acl_sync_and_the_guard_get_each_renaming_clusters_formats():
    data = {"clusters": {"c1": {"bootstrap": "a:1"}, "c2": {"bootstrap": "b:1", "names": {"topic_prefix": "p.",
                                                                                          "group_prefix": "g."}}},
            "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": ["orders"], "acl_sync": {"enabled": True}}
    rules = Topology.parse(data).grant_rules()
    assert rules is not None and rules.naming("c2", "TOPIC").render("orders") == "p.orders"
    assert rules.naming("c2", "GROUP").render("billing") == "g.billing" and rules.naming("c1", "TOPIC").is_identity


def test_names_changed_on_a_live_cluster_are_named_with_both_formats_and_unknown_clusters_pass():
    from mirrorflow.topology import renamed_live

    before = _topology(topics="{tenant}-{topic}", values={"tenant": "acme"}).cluster("c1").names.filled()
    assert before == {"topics": "acme-{topic}", "groups": "{group}"}
    same_filled = _topology(topic_prefix="acme-").cluster("c1").names.filled()
    assert renamed_live({"c1": before}, {"c1": same_filled}) == []  # another spelling of the same names
    now = {"c1": _topology(topic_prefix="acme-", group_prefix="acme-").cluster("c1").names.filled(),
           "c2": _topology().cluster("c2").names.filled()}
    [problem] = renamed_live({"c1": before}, now)  # c2: never recorded, nothing to hold it to
    assert problem.startswith("clusters.c1.names changed on a live cluster: groups from '{group}' to 'acme-{group}'")
    assert "mirror_onboard_cluster" in problem and "docs/naming.md" in problem
