"""Offsets configuration, position records, and the small rules of ownership and group matching."""

from __future__ import annotations

import pytest

from mirrorflow.errors import MirrorflowError, TopologyError
from mirrorflow.offsets.failover import FailoverRefused, match_groups
from mirrorflow.offsets.groups import GroupInfo, cut_metadata, parse_cut_metadata
from mirrorflow.offsets.position import Position
from mirrorflow.offsets.sync import owners_from
from mirrorflow.topology import parse_topology

BASE = """
clusters: {a: {bootstrap: "h:1"}, b: {bootstrap: "h:2"}}
tree: {level: 1, children: [a, b]}
topics: [t]
"""


def test_defaults_select_every_group_but_mirrorflows_own_with_exact_precision():
    offsets = parse_topology(BASE).offsets
    assert offsets.selects("orders") and not offsets.selects("_mirrorflow.link.a.L1")
    assert offsets.precision_for("anything") == ("exact", 60.0)
    assert offsets.schedule == "1m"


def test_precision_rules_first_match_wins_and_margins_parse():
    topo = parse_topology(BASE + """
offsets:
  groups: ["orders-.*", billing]
  margin: 30s
  precision:
    - {groups: "orders-legacy-.*", precision: timestamp, margin: 2m}
    - {groups: "orders-.*", precision: timestamp}
""")
    assert topo.offsets.precision_for("orders-legacy-1") == ("timestamp", 120.0)
    assert topo.offsets.precision_for("orders-new") == ("timestamp", 30.0)
    assert topo.offsets.precision_for("billing") == ("exact", 30.0)
    assert topo.offsets.selects("billing") and not topo.offsets.selects("billing-2")


@pytest.mark.parametrize("section, key", [
    ("offsets: {margin: 5 min}", "offsets.margin"),
    ("offsets: {groups: ['(']}", "offsets.groups"),
    ("offsets: {default_precision: approximate}", "offsets.default_precision"),
    ("offsets: {precision: [{groups: x, precision: exact, extra: 1}]}", "offsets.precision[0].extra"),
    ("offsets: {schedule: 1s}", "offsets.schedule"),
    ("lag: {sla: {records: -1}}", "lag.sla.records"),
    ("lag: {links: {a.L9: {records: 1}}}", "lag.links.a.L9"),
])
def test_bad_offsets_and_lag_settings_name_their_key(section, key):
    with pytest.raises(TopologyError) as err:
        parse_topology(BASE + section)
    assert key in str(err.value)


def test_position_records_round_trip_and_malformed_ones_are_named():
    pos = Position("g", "t", 3, "a", 42, 1700000000000, {"a:t:3": 42, "b:t:3": 7}, 42, 123, 5)
    assert Position.from_json(pos.to_json()) == pos
    assert pos.key() == b"a|t|3|g"
    for raw in (b"{}", b"not json", b'{"v": 1, "group": "g"}', b'{"v": 0}'):
        with pytest.raises(MirrorflowError, match="_mirrorflow.offsets: malformed position record"):
            Position.from_json(raw)
    # a newer mirrorflow's record is refused by name (tests/integration/test_formats.py: on a cluster)
    with pytest.raises(MirrorflowError, match="positions at topic _mirrorflow.offsets is format 2; this mirrorflow "
                                              "reads positions up to format 1"):
        Position.from_json(b'{"v": 2}')


def test_cut_metadata_round_trips_and_foreign_metadata_is_ignored():
    assert parse_cut_metadata(cut_metadata("c1", 99)) == ("c1", 99)
    assert parse_cut_metadata("") is None
    assert parse_cut_metadata("some app metadata") is None
    assert parse_cut_metadata("mirrorflow:cut owner=c1") is None


def test_owner_is_the_one_cluster_with_members_else_remembered_and_conflicts_are_reported():
    def info(group, members):
        return GroupInfo(group, "STABLE" if members else "EMPTY", members)

    infos = {"a": {"g1": info("g1", 2), "g2": info("g2", 0), "g3": info("g3", 1)},
             "b": {"g1": info("g1", 0), "g2": info("g2", 0), "g3": info("g3", 1)}}
    owners, conflicts = owners_from(infos, {"g2": "b", "g1": "b"})
    assert owners == {"g1": "a", "g2": "b"}
    assert conflicts == {"g3": ["a", "b"]}


def test_group_patterns_match_whole_names_and_bad_ones_are_refused():
    assert match_groups(["orders-.*", "billing"], ["orders-1", "billing", "billing-2", "x"]) == ["billing", "orders-1"]
    with pytest.raises(FailoverRefused, match="at least one"):
        match_groups([" "], ["x"])
    with pytest.raises(FailoverRefused, match="not a valid regex"):
        match_groups(["("], ["x"])


def test_a_failover_plan_survives_its_trip_through_xcom():
    from mirrorflow.offsets.failover import FailoverPlan, FailoverRow, table

    plan = FailoverPlan("c1", "c4", "planned", "exact", ["g"],
                        [FailoverRow("g", "t", 0, 5, None, 7, "exact", 2, 1.5, "scanned")], {"g t[0]": ["c1:t:0"]})
    assert FailoverPlan.from_dict(plan.to_dict()) == plan
    lines = table(plan).splitlines()
    assert lines[0].split() == ["group", "topic", "partition", "c1", "position", "c4", "before", "c4", "position",
                                "precision", "expected", "replay", "position", "age", "s"]
    assert lines[2].split() == ["g", "t", "0", "5", "-", "7", "exact", "2", "1.5"]
