"""The copy-flags rule over random trees: every message reaches every cluster exactly once.

Trees are random in shape (balanced, unbalanced, n-ary), size (2 to 12 leaves)
and level numbers (any valid assignment 1..63: gaps, the same number in
different branches). Targets are chosen by hypothesis among all leaves of each
sibling subtree, per copy, which models operators switching targets at any
moment. Negative controls show the checks fail when the rule is broken.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from mirrorflow import copyflags
from mirrorflow.copyflags import HEADER, Decision, decide, encode
from mirrorflow.topology import Topology
from mirrorflow.topology.tree import build_distributors, iter_leaves

from .simulate import LoopDetected, exactly_once, simulate

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- random trees


def _shape(draw, leaves: list[str], max_children: int):
    """Nested lists: a leaf name, or the list of an inner node's children."""
    if len(leaves) == 1:
        return leaves[0]
    k = draw(st.integers(2, min(max_children, len(leaves))))
    cuts = sorted(draw(st.sets(st.integers(1, len(leaves) - 1), min_size=k - 1, max_size=k - 1)))
    bounds = [0, *cuts, len(leaves)]
    return [_shape(draw, leaves[a:b], max_children) for a, b in zip(bounds, bounds[1:])]


def _height(shape) -> int:
    return 0 if isinstance(shape, str) else 1 + max(_height(c) for c in shape)


def _levels(draw, shape, upper: int):
    """Any valid levels: each node above every level below it, all within 1..upper."""
    if isinstance(shape, str):
        return shape
    low = _height(shape)  # the lowest level that leaves room for every node below
    level = draw(st.one_of(st.integers(low, min(upper, low + 2)), st.integers(low, upper)))
    return {"level": level, "children": [_levels(draw, c, level - 1) for c in shape]}


@st.composite
def trees(draw, min_leaves: int = 2, max_leaves: int = 12, max_children: int = 4) -> dict:
    n = draw(st.integers(min_leaves, max_leaves))
    names = draw(st.permutations([f"k{i}" for i in range(n)]))  # document order != name order
    return _levels(draw, _shape(draw, list(names), max_children), copyflags.LEVEL_MAX)


@st.composite
def topologies(draw, **kwargs) -> Topology:
    tree = draw(trees(**kwargs))
    clusters = {name: {"bootstrap": f"127.0.0.1:{19092 + i}"} for i, name in enumerate(sorted(iter_leaves(tree)))}
    return Topology.parse({"clusters": clusters, "tree": tree, "topics": [".*"]})


def distributors_of(topo: Topology):
    return {c: topo.distributors(c) for c in topo.leaves}


def any_target(data) -> Callable:
    return lambda dist: data.draw(st.sampled_from(dist.sibling_leaves), label=f"target of {dist.link_id}")


def _path_to(tree, leaf: str) -> list[tuple[dict, int]]:
    """``(inner node, index of the child holding leaf)`` from the root down."""
    for j, child in enumerate(tree["children"]):
        if child == leaf:
            return [(tree, j)]
        if isinstance(child, dict) and leaf in iter_leaves(child):
            return [(tree, j), *_path_to(child, leaf)]
    raise AssertionError(f"{leaf} not in tree")


# --------------------------------------------------------------------------- the properties


@PROPERTY
@given(topo=topologies(), data=st.data())
def test_every_message_reaches_every_cluster_exactly_once(topo, data):
    dists = distributors_of(topo)
    for origin in topo.leaves:
        run = simulate(dists, origin, choose=any_target(data))
        assert exactly_once(run, topo.leaves), (origin, dict(run.received), run.copies)
        assert len(run.copies) == len(topo.leaves) - 1
        # each sibling subtree of each node is entered at most once
        assert max(run.entries.values(), default=1) == 1


@PROPERTY
@given(topo=topologies(), data=st.data())
def test_flags_only_ever_carry_levels_of_the_receivers_ancestors(topo, data):
    """A copy's flags are a chain of levels on the path to the receiver, lowest = the level it crossed."""
    dists = distributors_of(topo)
    tree = topo.to_dict()["tree"]
    ancestors = {leaf: {node["level"] for node, _ in _path_to(tree, leaf)} for leaf in topo.leaves}
    origin = data.draw(st.sampled_from(topo.leaves))
    run = simulate(dists, origin, choose=any_target(data))
    for source, link_id, target, flags in run.copies:
        levels = copyflags.levels_of(flags)
        assert set(levels) <= ancestors[target]
        assert levels[0] == topo.link(link_id).level
        assert flags < 2**63


@PROPERTY
@given(tree=trees(), data=st.data())
def test_existing_flags_never_send_a_message_where_it_already_went(tree, data):
    """With any valid pre-existing flags, a distributor copies exactly into the subtrees still missing it.

    Valid flags at leaf x are a set of levels of x's ancestors (any such set is
    reachable: the message crossed those nodes on its way to x, the lowest last).
    If the set is empty x is the origin and everything else is missing the
    message. Otherwise let m be the lowest level and C the child of the level-m
    ancestor that holds x: the message entered C at x, so the leaves of C other
    than x are missing it, and every other leaf already has it or gets it from
    another cluster. A distributor must copy into a sibling subtree if and only
    if that subtree is missing the message, and then it is missing it entirely.
    """
    clusters = {name: {"bootstrap": "h:1"} for name in iter_leaves(tree)}
    topo = Topology.parse({"clusters": clusters, "tree": tree, "topics": ["t"]})
    x = data.draw(st.sampled_from(topo.leaves), label="receiver")
    path = _path_to(tree, x)
    chosen = data.draw(st.lists(st.sampled_from(path), unique_by=lambda p: p[0]["level"]), label="crossed")
    flags = sum(copyflags.bit(node["level"]) for node, _ in chosen)
    everyone = set(topo.leaves)
    if chosen:
        node, j = min(chosen, key=lambda p: p[0]["level"])
        missing = set(iter_leaves(node["children"][j])) - {x}
    else:
        missing = everyone - {x}
    headers = [("app", b"v"), (HEADER, encode(flags))]
    for dist in topo.distributors(x):
        decision = decide(dist.level, headers)
        subtree = set(dist.sibling_leaves)
        assert not decision.malformed and decision.flags_in == flags
        if decision.copy:
            assert subtree <= missing, (dist.link_id, f"{flags:#b}", subtree - missing)
            assert decision.flags_out == flags | dist.bit
        else:
            assert not subtree & missing, (dist.link_id, f"{flags:#b}", subtree & missing)
    # and together the copies cover exactly what is missing
    copied = set().union(*(set(d.sibling_leaves) for d in topo.distributors(x) if decide(d.level, headers).copy))
    assert copied == missing


@PROPERTY
@given(topo=topologies(max_leaves=8), data=st.data(), junk=st.sampled_from([b"", b"x", b"-1", b"01", None]))
def test_malformed_header_at_the_origin_still_delivers_exactly_once(topo, data, junk):
    dists = distributors_of(topo)
    origin = data.draw(st.sampled_from(topo.leaves))
    run = simulate(dists, origin, choose=any_target(data), headers=[(HEADER, junk)])
    assert exactly_once(run, topo.leaves)


@PROPERTY
@given(topo=topologies())
def test_default_targets_spread_over_the_sibling_subtree(topo):
    for level in topo.levels:
        for dist in topo.links(level):
            assert dist.default_target in dist.sibling_leaves
            assert set(dist.alternatives) == set(dist.sibling_leaves) - {dist.default_target}
    # the i-th leaf of the source's own child targets the (i mod n)-th leaf of the sibling subtree
    tree = topo.to_dict()["tree"]
    for dist in topo.all_links():
        node = tree
        for j in re.findall(r"\[(\d+)\]", dist.node_path):
            node = node["children"][int(j)]
        own = next(list(iter_leaves(c)) for c in node["children"] if dist.source in iter_leaves(c))
        i = own.index(dist.source)
        assert dist.default_target == dist.sibling_leaves[i % len(dist.sibling_leaves)]


# --------------------------------------------------------------------------- negative controls


def own_bit_only(level: int, headers) -> Decision:
    """Broken: looks only at its own bit, not the lower ones."""
    flags, *_ = copyflags.read_flags(headers)
    if flags & copyflags.bit(level):
        return Decision(False, flags, None)
    return Decision(True, flags, flags | copyflags.bit(level))


def never_marks(level: int, headers) -> Decision:
    """Broken: copies without setting its bit."""
    flags, *_ = copyflags.read_flags(headers)
    if flags & copyflags.mask(level):
        return Decision(False, flags, None)
    return Decision(True, flags, flags)


def four_clusters() -> Topology:
    return Topology.parse({
        "clusters": {f"c{i}": {"bootstrap": f"h:{i}"} for i in range(1, 5)},
        "tree": {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]},
                                          {"level": 1, "children": ["c3", "c4"]}]},
        "topics": ["t"],
    })


def test_control_own_bit_only_mask_duplicates():
    topo = four_clusters()
    run = simulate(distributors_of(topo), "c1", decide=own_bit_only)
    # c2's level-3 distributor no longer sees the level-1 bit and sends c4 a second copy
    assert not exactly_once(run, topo.leaves) and run.received["c4"] == 2


def test_control_not_setting_the_bit_loops_and_the_bound_catches_it():
    topo = four_clusters()
    with pytest.raises(LoopDetected):
        simulate(distributors_of(topo), "c1", decide=never_marks)


def test_control_levels_not_growing_to_the_root_break_delivery():
    """The level-order rule the topology enforces is needed: without it a target switch duplicates."""
    bad_tree = {"level": 1, "children": [{"level": 3, "children": ["c1", "c2"]},
                                         {"level": 3, "children": ["c3", "c4"]}]}
    with pytest.raises(Exception, match="must be larger"):
        Topology.parse({"clusters": {c: {"bootstrap": "h:1"} for c in ("c1", "c2", "c3", "c4")},
                        "tree": bad_tree, "topics": ["t"]})
    dists = build_distributors(bad_tree)  # unchecked on purpose
    run = simulate(dists, "c1", choose=lambda d: d.sibling_leaves[0])
    assert run.received["c3"] == 2 and run.received["c4"] == 0


_CONTROL = settings(max_examples=300, deadline=None, database=None, phases=[Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("broken", [own_bit_only, never_marks])
def test_control_the_property_test_catches_a_broken_rule(broken):
    """The random-tree property, run against a broken rule, must find a counterexample."""

    @_CONTROL
    @given(topo=topologies(), data=st.data())
    def prop(topo, data):
        for origin in topo.leaves:
            run = simulate(distributors_of(topo), origin, choose=any_target(data), decide=broken)
            assert exactly_once(run, topo.leaves)

    with pytest.raises((AssertionError, LoopDetected)):
        prop()
