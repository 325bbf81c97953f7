"""Operator cluster changes (add / remove events) applied on top of the topology file."""

from __future__ import annotations

import logging

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.topology import Topology, parse_topology
from mirrorflow.topology.changes import CHANGES_SOURCE, add_event, apply_changes, remove_event

THREE = """
clusters:
  c1: {bootstrap: "127.0.0.1:9091"}
  c2: {bootstrap: "127.0.0.1:9092"}
  c3: {bootstrap: "127.0.0.1:9093"}
tree: {level: 3, children: [{level: 1, children: [c1, c2]}, c3]}
topics: [orders]
"""
C4 = {"bootstrap": "127.0.0.1:9094"}


def three(extra: str = "") -> Topology:
    return parse_topology(THREE + extra)


def tree_of(topology: Topology) -> dict:
    return topology.tree.model_dump()


def test_events_are_plain_json():
    assert add_event("c4", C4, sibling_of="c3", level=1, at="t") == {
        "op": "add", "cluster": "c4", "config": C4, "sibling_of": "c3", "level": 1, "at": "t"}
    assert remove_event("c2", run_id="r") == {"op": "remove", "cluster": "c2", "run_id": "r"}


def test_no_events_is_the_file():
    base = three()
    assert apply_changes(base, []) is base


def test_add_then_remove_in_order():
    base = three()
    out = apply_changes(base, [add_event("c4", C4, sibling_of="c3", level=1), remove_event("c1")])
    assert tree_of(out) == {"level": 3, "children": ["c2", {"level": 1, "children": ["c3", "c4"]}]}
    assert list(out.clusters) == ["c2", "c3", "c4"]
    assert out.cluster("c4").bootstrap == "127.0.0.1:9094"
    assert list(base.clusters) == ["c1", "c2", "c3"]  # the base is not changed


def test_order_matters():
    events = [add_event("c4", C4, sibling_of="c3", level=2), remove_event("c4"),
              add_event("c4", C4, sibling_of="c3", level=1)]
    out = apply_changes(three(), events)
    assert tree_of(out) == {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]},
                                                     {"level": 1, "children": ["c3", "c4"]}]}


def test_an_add_the_file_already_has_is_ignored(caplog):
    base = parse_topology(THREE.replace('c3: {bootstrap: "127.0.0.1:9093"}',
                                        'c3: {bootstrap: "127.0.0.1:9093"}\n  c4: {bootstrap: "127.0.0.1:9099"}')
                          .replace("c3]}", "{level: 2, children: [c4, c3]}]}"))
    with caplog.at_level(logging.INFO, logger="mirrorflow.topology.changes"):
        out = apply_changes(base, [add_event("c4", C4, sibling_of="c3", level=1)])
    assert out is base
    assert out.cluster("c4").bootstrap == "127.0.0.1:9099"  # the file wins
    assert f"{CHANGES_SOURCE}[0]: cluster c4 is already in the topology; the add is ignored" in caplog.messages


def test_a_remove_of_an_absent_cluster_is_ignored(caplog):
    base = three()
    with caplog.at_level(logging.INFO, logger="mirrorflow.topology.changes"):
        out = apply_changes(base, [remove_event("c2"), remove_event("c2")])
    assert list(out.clusters) == ["c1", "c3"]
    assert f"{CHANGES_SOURCE}[1]: cluster c2 is not in the topology; the removal is ignored" in caplog.messages


def test_an_add_whose_sibling_is_gone_raises_naming_the_event():
    events = [remove_event("c2"), add_event("c5", C4, sibling_of="c2", level=1)]
    with pytest.raises(TopologyError) as info:
        apply_changes(three(), events)
    assert info.value.path == f"{CHANGES_SOURCE}[1]"
    assert info.value.path.startswith("cluster changes (")
    assert info.value.problem.startswith("adding cluster 'c5' no longer applies to the topology: ")
    assert "'c2'" in info.value.problem


def test_an_add_whose_level_no_longer_fits_raises():
    with pytest.raises(TopologyError) as info:
        apply_changes(three(), [add_event("c4", C4, sibling_of="c3", level=7)])
    assert info.value.path == f"{CHANGES_SOURCE}[0]"
    assert "tree.level" in info.value.problem


def test_a_remove_that_no_longer_applies_raises():
    with pytest.raises(TopologyError) as info:
        apply_changes(three("schemas: {primary: c3}\n"), [remove_event("c3")])
    assert info.value.path == f"{CHANGES_SOURCE}[0]"
    assert info.value.problem.startswith("removing cluster 'c3' no longer applies: ")
    assert "schema registry primary" in info.value.problem


@pytest.mark.parametrize("event", [
    {"op": "rename", "cluster": "c1"},
    {"op": "add"},
    {"cluster": "c1"},
    {"op": "remove", "cluster": 3},
    {"op": None, "cluster": "c1"},
])
def test_a_malformed_event_raises(event):
    with pytest.raises(TopologyError) as info:
        apply_changes(three(), [remove_event("c9"), event])
    assert info.value.path == f"{CHANGES_SOURCE}[1]"
    assert info.value.problem == f"not a cluster change: {event!r}"


@pytest.mark.parametrize("event, words", [
    ({"op": "add", "cluster": "c4", "sibling_of": "c3", "level": 1}, "'config'"),
    ({"op": "add", "cluster": "c4", "config": C4, "level": 1}, "'sibling_of'"),
    ({"op": "add", "cluster": "c4", "config": C4, "sibling_of": "c3", "level": "one"}, "'one'"),
    ({"op": "add", "cluster": "c4", "config": {"bootstrap": "nohost"}, "sibling_of": "c3", "level": 1},
     "clusters.c4.bootstrap"),
])
def test_an_add_with_missing_or_bad_fields_raises(event, words):
    with pytest.raises(TopologyError) as info:
        apply_changes(three(), [event])
    assert info.value.path == f"{CHANGES_SOURCE}[0]"
    assert info.value.problem.startswith("adding cluster 'c4' no longer applies to the topology: ")
    assert words in info.value.problem
