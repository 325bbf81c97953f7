"""Decommissioning, the pure part: which links move, which drain, which removals are refused."""

from __future__ import annotations

import pytest

from mirrorflow.actions.decommission import DecommissionPlan, DecommissionRefused, Move, plan_decommission
from mirrorflow.topology import Topology, parse_topology

FOUR_TREE = "{level: 3, children: [{level: 1, children: [c1, c2]}, {level: 1, children: [c3, c4]}]}"


def topo(tree: str, n: int = 4, extra: str = "") -> Topology:
    clusters = "\n".join(f'  c{i}: {{bootstrap: "127.0.0.1:{9090 + i}"}}' for i in range(1, n + 1))
    return parse_topology(f"clusters:\n{clusters}\ntree: {tree}\ntopics: [orders]\n{extra}")


def four(extra: str = "") -> Topology:
    return topo(FOUR_TREE, extra=extra)


def test_removing_c4_moves_c2_l3_to_c3_and_drains_c4():
    before = four()
    assert before.link("c2.L3").default_target == "c4"
    plan = plan_decommission(before, "c4", {})
    assert plan.cluster == "c4"
    assert plan.moves == [Move(link_id="c2.L3", source="c2", level=3, old_target="c4", new_target="c3")]
    assert plan.drain == {1: ["c4.L1"], 3: ["c4.L3"]}
    assert plan.targets == {}  # c3 is c2.L3's default target once c4 is gone


def test_a_link_switched_onto_the_leaving_cluster_moves_too():
    plan = plan_decommission(four(), "c4", {"c1.L3": "c4"})
    assert plan.moves == [Move("c1.L3", "c1", 3, "c4", "c3"), Move("c2.L3", "c2", 3, "c4", "c3")]
    assert plan.targets == {}


def test_a_link_already_switched_away_does_not_move():
    plan = plan_decommission(four(), "c4", {"c2.L3": "c3"})
    assert plan.moves == []
    assert plan.drain == {1: ["c4.L1"], 3: ["c4.L3"]}


def test_links_that_stay_keep_their_effective_target():
    # removing c3: c4 becomes the first leaf of its side, so c4.L3's default would go c2 -> c1
    plan = plan_decommission(four(), "c3", {})
    assert plan.moves == [Move("c1.L3", "c1", 3, "c3", "c4")]
    assert plan.drain == {1: ["c3.L1"], 3: ["c3.L3"]}
    assert plan.targets == {"c4.L3": "c2"}


def test_plan_round_trips_through_a_dict():
    plan = plan_decommission(four(), "c3", {})
    data = plan.to_dict()
    assert data["drain"] == {"1": ["c3.L1"], "3": ["c3.L3"]}
    assert DecommissionPlan.from_dict(data) == plan


def test_an_unknown_cluster_is_refused():
    with pytest.raises(DecommissionRefused) as info:
        plan_decommission(four(), "c9", {})
    assert str(info.value) == "cluster 'c9' is not in the topology (clusters: c1, c2, c3, c4)"


def test_the_schema_primary_is_refused():
    with pytest.raises(DecommissionRefused) as info:
        plan_decommission(four("schemas: {primary: c4}"), "c4", {})
    assert str(info.value).startswith("c4 cannot leave: ")
    assert "schemas.primary: 'c4' is the schema registry primary" in str(info.value)
    # another cluster may leave
    assert plan_decommission(four("schemas: {primary: c4}"), "c1", {}).drain == {1: ["c1.L1"], 3: ["c1.L3"]}


def test_the_only_archived_cluster_is_refused():
    with pytest.raises(DecommissionRefused, match=r"archive\.clusters: 'c2' is the only archived cluster"):
        plan_decommission(four("archive: {clusters: [c2]}"), "c2", {})


def test_leaving_a_single_cluster_is_refused():
    with pytest.raises(DecommissionRefused, match="would leave a single cluster"):
        plan_decommission(topo("{level: 3, children: [c1, c2]}", n=2), "c1", {})


@pytest.mark.parametrize("leaving, renamed", [("c1", "c2.L3, c3.L3"), ("c2", "c1.L3, c3.L3"),
                                               ("c3", "c1.L3, c2.L3")])
def test_a_removal_that_renames_links_is_refused(leaving, renamed):
    nary = topo("{level: 3, children: [c1, c2, c3]}", n=3)
    with pytest.raises(DecommissionRefused) as info:
        plan_decommission(nary, leaving, {})
    assert str(info.value).startswith(f"removing {leaving} would rename link(s) {renamed}, and checkpoints are "
                                      "kept under link ids")


def test_the_first_leaf_of_a_sibling_subtree_leaving_an_nary_node_is_refused():
    tree = topo("{level: 3, children: [{level: 1, children: [c1, c2]}, c3, c4]}")
    with pytest.raises(DecommissionRefused, match=r"would rename link\(s\) c3\.L3\.c2, c4\.L3\.c2"):
        plan_decommission(tree, "c1", {})


def test_a_removal_that_keeps_every_link_id_of_an_nary_node_is_planned():
    flat = topo("{level: 3, children: [c1, c2, c3, c4]}")
    plan = plan_decommission(flat, "c2", {})
    assert plan.moves == []  # every link into c2 is its own subtree's: they go with it
    assert plan.drain == {3: ["c2.L3.c1", "c2.L3.c3", "c2.L3.c4"]}
    assert plan.targets == {}
