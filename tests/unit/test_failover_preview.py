"""The lag monitor's failover preview without a broker: owners, the entries from a plan, the limits, failures.

The plans themselves are the failover's own (``plan_failover``); here a stand-in reader hands out plans
so that what the preview makes of them, and what it refuses to spend, can be checked exactly.
"""

from __future__ import annotations

import json

from mirrorflow.lag import GroupPartitionLag
from mirrorflow.offsets import failover_preview as fp
from mirrorflow.offsets.failover import FailoverPlan, FailoverRow
from mirrorflow.offsets.position import Position
from mirrorflow.topology import parse_topology

THREE = """
clusters: {c1: {bootstrap: "h:1"}, c2: {bootstrap: "h:2"}, c3: {bootstrap: "h:3"}}
tree: {level: 2, children: [{level: 1, children: [c1, c2]}, c3]}
topics: [t]
"""
FOUR = """
clusters: {c1: {bootstrap: "h:1"}, c2: {bootstrap: "h:2"}, c3: {bootstrap: "h:3"}, c4: {bootstrap: "h:4"}}
tree: {level: 2, children: [{level: 1, children: [c1, c2]}, {level: 1, children: [c3, c4]}]}
topics: [t]
"""


def topo(extra: str = ""):
    return parse_topology(THREE + extra, source="test")


def row(cluster, group, partition=0, committed=10, end=12, members=0, topic="t"):
    return GroupPartitionLag(cluster, group, topic, partition, max(0, end - committed), committed=committed, end=end,
                             members=members)


def position(group, partition=0, owner="c1", offset=10, frontier_offset=10):
    return Position(group, "t", partition, owner, offset, 1, {f"{owner}:t:{partition}": offset}, frontier_offset)


def plan(target, group="g", replays=(0,), precision="exact", missing=None):
    rows = [FailoverRow(group, "t", p, 10, None, 10, precision, r, 1.0, "scanned") for p, r in enumerate(replays)]
    return FailoverPlan("c1", target, "planned", precision, [group], rows, missing or {})


class FakeReader:
    """Plans by target; records every call (the preview must not ask for more than it shows)."""

    def __init__(self, plans=None, positions=None, published=None):
        self.plans = plans or {}
        self.positions_ = positions
        self.published_ = published or {}
        self.calls: list[tuple] = []

    def published(self, owner):
        self.calls.append(("published", owner))
        found = self.published_.get(owner, {})
        if isinstance(found, Exception):
            raise found
        return found

    def positions(self, owner, group, published):
        self.calls.append(("positions", owner, group))
        if isinstance(self.positions_, Exception):
            raise self.positions_
        return [position(group)] if self.positions_ is None else self.positions_

    def plan(self, owner, target, group, positions):
        self.calls.append(("plan", owner, target, group))
        found = self.plans.get((group, target), plan(target, group))
        if isinstance(found, Exception):
            raise found
        return found


def preview(rows, remembered, reader, unreachable=None, topology=None, **limits):
    limits.setdefault("threads", 1)  # the calls in a known order
    return fp.preview_failovers(topology or topo(), {}, remembered, rows, unreachable or {},
                                limits=fp.Limits(**limits), reader=reader)


# --------------------------------------------------------------------------- who is previewed


def test_owner_is_where_the_group_has_members_else_the_remembered_one_and_two_actives_are_a_conflict():
    rows = [row("c1", "runs"), row("c2", "runs", members=2),          # members on c2 only: c2 owns it
            row("c1", "idle"), row("c2", "idle"),                     # idle everywhere: remembered owner
            row("c1", "both", members=1), row("c3", "both", members=1),
            row("c1", "nobody"),                                      # idle, never owned: not previewed
            row("c1", "_mirrorflow.link.c1.L1"),                      # mirrorflow's own: never
            GroupPartitionLag("c3", "*", "*", None, None, error="cluster c3 unreachable")]
    found = fp.subjects(rows, {"idle": "c1", "runs": "c1", "gone": "c3"}, topo().offsets.selects)
    assert found == [fp.Subject("both", None, ("c1", "c3")), fp.Subject("gone", "c3", ()),
                     fp.Subject("idle", "c1", ()), fp.Subject("runs", "c2", ("c2",))]


def test_only_the_groups_the_topology_selects():
    rows = [row("c1", "orders-1"), row("c1", "billing")]
    selects = topo("offsets: {groups: ['orders-.*']}\n").offsets.selects
    assert [s.group for s in fp.subjects(rows, {"orders-1": "c1", "billing": "c1"}, selects)] == ["orders-1"]


# --------------------------------------------------------------------------- an entry from the failover's plan


def test_exact_plan_replays_its_expected_replay_and_skips_nothing():
    entry = fp.summarize(plan("c2", replays=(0, 3, 1)), "g")
    assert entry == {"replay": 4, "skip": 0, "precision": "exact", "partitions": 3,
                     "replay_by_partition": {"t[1]": 3, "t[2]": 1}, "why": None}


def test_timestamp_plan_cannot_promise_no_skip():
    entry = fp.summarize(plan("c2", replays=(2,), precision="timestamp"), "g")
    assert (entry["replay"], entry["skip"], entry["precision"]) == (2, None, "timestamp")
    assert "not proven" in entry["why"]


def test_a_target_still_missing_consumed_messages_waits_first_so_the_replay_is_only_a_lower_bound():
    entry = fp.summarize(plan("c2", replays=(1,), missing={"g t[0]": ["c1:t:0"]}), "g")
    assert (entry["replay"], entry["skip"], entry["replay_at_least"]) == (None, 0, 1)
    assert entry["waits_for"] == {"t[0]": ["c1:t:0"]}
    assert entry["why"].startswith("c2 does not hold yet the last message the group consumed of 1 partition(s)")


# --------------------------------------------------------------------------- the whole preview


def test_every_other_cluster_gets_an_entry_and_the_format_is_json():
    reader = FakeReader({("g", "c2"): plan("c2", replays=(4,)), ("g", "c3"): plan("c3", replays=(0,))})
    out = preview([row("c1", "g"), row("c2", "g"), row("c3", "g")], {"g": "c1"}, reader)
    assert json.loads(json.dumps(out)) == out
    assert out["g"]["owner"] == "c1" and out["g"]["active_on"] == []
    assert {t: (e["replay"], e["skip"]) for t, e in out["g"]["targets"].items()} == {"c2": (4, 0), "c3": (0, 0)}
    assert all(e["duration_s"] >= 0 for e in out["g"]["targets"].values())
    together = preview([row("c1", "g"), row("c2", "g"), row("c3", "g")], {"g": "c1"}, FakeReader(reader.plans),
                       threads=4)  # plans at once: the same entries, clusters in name order
    assert list(together["g"]["targets"]) == ["c2", "c3"]
    assert {t: e["replay"] for t, e in together["g"]["targets"].items()} == {"c2": 4, "c3": 0}
    # positions once per group, published positions once per cluster, one plan per target
    assert reader.calls == [("published", "c1"), ("positions", "c1", "g"), ("published", "c2"), ("published", "c3"),
                            ("plan", "c1", "c2", "g"), ("plan", "c1", "c3", "g")]


def test_the_plan_gets_the_positions_the_switch_would_read_on_the_target():
    now = [position("g", 0, offset=12), position("g", 1, offset=7)]
    old = position("g", 0, offset=10)
    gone = Position("g", "old-topic", 0, "c1", 3, 1, {}, 3)  # no longer published by c1, still on c4
    others = [Position("h", "t", 0, "c1", 1, 1, {}, 1), Position("g", "t", 0, "c2", 1, 1, {}, 1)]
    there = {p.key(): p for p in (old, gone, *others)}
    assert fp.after_publish(there, now, "c1", "g") == [gone, *now]

    class Recording(FakeReader):
        def plan(self, owner, target, group, positions):
            self.got = positions
            return super().plan(owner, target, group, positions)

    reader = Recording(positions=now, published={"c4": there})
    topology = parse_topology(FOUR, source="test")
    preview([row("c1", "g")], {"g": "c1"}, reader, topology=topology)
    assert reader.got == [gone, *now]  # the last plan made: c4's


def test_a_target_whose_positions_cannot_be_read_says_so():
    out = preview([row("c1", "g")], {"g": "c1"}, FakeReader(published={"c3": RuntimeError("no acl")}))
    assert out["g"]["targets"]["c3"] == fp.unknown("the positions on c3 were not read: RuntimeError: no acl")
    assert out["g"]["targets"]["c2"]["replay"] == 0


def test_one_failing_group_or_target_is_recorded_and_the_others_are_still_previewed():
    reader = FakeReader({("a", "c2"): RuntimeError("boom"), ("b", "c3"): ValueError("bad")})
    reader.positions_ = None
    out = preview([row("c1", "a"), row("c1", "b"), row("c1", "c")], {"a": "c1", "b": "c1", "c": "c1"}, reader)
    assert out["a"]["targets"]["c2"]["why"] == "the plan on c2 failed: RuntimeError: boom"
    assert out["a"]["targets"]["c2"]["replay"] is None
    assert out["a"]["targets"]["c3"]["replay"] == 0
    assert out["b"]["targets"]["c3"]["why"] == "the plan on c3 failed: ValueError: bad"
    assert all(e["replay"] == 0 for e in out["c"]["targets"].values())


def test_positions_that_cannot_be_read_or_do_not_exist_say_so_for_every_target():
    failing = preview([row("c1", "g")], {"g": "c1"}, FakeReader(positions=RuntimeError("down")))
    assert {e["why"] for e in failing["g"]["targets"].values()} == {
        "its positions on c1 were not read: RuntimeError: down"}
    empty = preview([], {"g": "c1"}, FakeReader(positions=[]))
    assert {e["why"] for e in empty["g"]["targets"].values()} == {
        "no positions yet: the group has no committed offset on c1 on the mirrored topics"}
    unread = preview([row("c1", "g")], {"g": "c1"}, FakeReader(published={"c1": RuntimeError("acl")}))
    assert {e["why"] for e in unread["g"]["targets"].values()} == {
        "the positions published on c1 were not read: RuntimeError: acl"}


def test_unreachable_clusters_and_conflicts_are_reasons_not_errors():
    down = {"c3": "is unreachable at h:3: _TRANSPORT: refused"}
    reader = FakeReader()
    out = preview([row("c1", "g")], {"g": "c1"}, reader, unreachable=down)
    assert out["g"]["targets"]["c3"] == fp.unknown("cluster c3 is unreachable at h:3: _TRANSPORT: refused")
    assert out["g"]["targets"]["c2"]["replay"] == 0
    owner_down = preview([row("c1", "h")], {"h": "c3"}, FakeReader(), unreachable=down)
    assert {e["why"] for e in owner_down["h"]["targets"].values()} == {
        "its owner, cluster c3, is unreachable at h:3: _TRANSPORT: refused"}
    both = FakeReader()
    out = preview([row("c1", "x", members=1), row("c2", "x", members=1)], {"x": "c1"}, both)
    assert set(out["x"]["targets"]) == {"c2", "c3"}
    assert all(e["why"].startswith("active on c1 and c2 at once") for e in out["x"]["targets"].values())
    assert both.calls == []  # nothing read for a group that cannot be failed over


def test_limits_on_plans_and_records_leave_a_note_and_no_plan():
    rows = [row(c, g) for g in ("a", "b") for c in ("c1", "c2", "c3")]
    reader = FakeReader()
    out = preview(rows, {"a": "c1", "b": "c1"}, reader, plans=3)
    assert [t for g in ("a", "b") for t, e in out[g]["targets"].items() if e["replay"] is not None] == \
           ["c2", "c3", "c2"]
    assert out["b"]["targets"]["c3"]["why"] == ("not previewed: at most 3 group x cluster plans per measurement "
                                                "(groups in name order)")
    assert sum(1 for c in reader.calls if c[0] == "plan") == 3

    behind = [row("c1", "g", committed=10, end=10), row("c2", "g", committed=0, end=500_000)]  # far behind on c2
    out = preview(behind, {"g": "c1"}, FakeReader(), records=1000)
    assert out["g"]["targets"]["c2"]["why"].startswith("not previewed: a plan would read about 500000 messages on c2")
    # no commit on c3: its first cut is searched from the earliest offset, bounded by the owner's end
    assert out["g"]["targets"]["c3"]["replay"] == 0
    last = position("g", offset=5000, frontier_offset=5000)  # published: nothing to scan on the owner
    out = preview([row("c1", "g", committed=5000, end=5000)], {"g": "c1"},
                  FakeReader(published={"c1": {last.key(): last}}), records=1000)
    assert out["g"]["targets"]["c3"]["why"].startswith("not previewed: a plan would read about 5000 messages on c3")


def test_a_group_on_many_partitions_is_left_out_whole():
    wide = [row("c1", "g", partition=p) for p in range(3)] + [row("c1", "g", partition=0, topic="not-mirrored")]
    reader = FakeReader()
    out = preview(wide, {"g": "c1"}, reader, partitions=2)
    assert {e["why"] for e in out["g"]["targets"].values()} == {
        "not previewed: the group committed on 3 partitions on c1; a plan reads each of them on the target in turn "
        "(about a second each), more than 2 per measurement"}
    assert [c[0] for c in reader.calls] == ["published"]
    enough = preview(wide, {"g": "c1"}, FakeReader(), partitions=3)
    assert all(e["replay"] == 0 for e in enough["g"]["targets"].values())


def test_the_owners_first_position_scan_is_bounded_too():
    owner_row = row("c1", "g", committed=2_000_000, end=2_000_000)
    out = preview([owner_row, row("c2", "g", committed=2_000_000, end=2_000_000)], {"g": "c1"}, FakeReader(),
                  records=1000)
    assert out["g"]["targets"]["c2"]["why"].startswith(
        "not previewed: its positions on c1 would read about 1000000 messages")
    last = position("g", offset=1_999_990, frontier_offset=1_999_990)
    published = {"c1": {last.key(): last}}
    fresh = preview([owner_row, row("c2", "g", committed=2_000_000, end=2_000_000)], {"g": "c1"},
                    FakeReader(published=published), records=1000)
    assert fresh["g"]["targets"]["c2"]["replay"] == 0  # 10 messages since the published position


def test_the_time_budget_stops_new_plans():
    now = [0.0]

    class SlowReader(FakeReader):
        def plan(self, owner, target, group, positions):
            now[0] += 10  # each plan takes 10 s
            return super().plan(owner, target, group, positions)

    out = fp.preview_failovers(topo(), {}, {"a": "c1", "b": "c1"}, [row("c1", "a"), row("c1", "b")], {},
                               limits=fp.Limits(seconds=15, threads=1), reader=SlowReader(), clock=lambda: now[0])
    entries = [e for g in ("a", "b") for e in out[g]["targets"].values()]
    assert [e["replay"] for e in entries] == [0, 0, None, None]  # started at 0 s and 10 s; none from 20 s on
    assert [e.get("duration_s") for e in entries[:2]] == [10, 10]
    assert entries[-1]["why"] == "not previewed: the preview's 15s per measurement were spent (groups in name order)"


def test_the_cluster_reader_makes_the_failover_dags_own_calls(monkeypatch):
    calls = {}
    monkeypatch.setattr(fp, "plan_failover", lambda target, positions, **kw: calls.setdefault("plan", (target, kw)))
    monkeypatch.setattr(fp, "current_positions",
                        lambda client, groups, selects, previous: calls.setdefault("positions", (client, groups)))
    topology = topo("offsets: {default_precision: timestamp, margin: 30s}\n")
    reader = fp.ClusterReader(topology, {"c1": "client-1", "c2": "client-2"})
    reader.positions("c1", "g", {})
    reader.plan("c1", "c2", "g", [])
    assert calls["positions"] == ("client-1", ["g"])
    assert calls["plan"] == ("client-2", {"source": "c1", "mode": "planned", "precision": "timestamp",
                                          "margin_s": 30.0, "groups": ["g"]})
