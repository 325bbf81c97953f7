"""Healing a retention gap from the archive (mirrorflow.copy.heal): the rule, its sentences, and its settings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mirrorflow.copy.heal.archive import heal_plans, plan_heal, ranges_text
from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow.copy.state.checkpoints import copy_start
from mirrorflow.errors import TopologyError
from mirrorflow.topology import parse_topology

BASE = """
clusters:
  c1: {bootstrap: "127.0.0.1:9091"}
  c2: {bootstrap: "127.0.0.1:9092"}
  c3: {bootstrap: "127.0.0.1:9093"}
tree: {level: 3, children: [{level: 1, children: [c1, c2]}, c3]}
topics: [orders]
"""


def test_a_gap_the_archive_holds_whole_is_restored_to_the_sources_first_offset():
    heal = plan_heal("c1", "orders", 0, 100, 150, [(0, 120), (120, 400)])
    assert heal.ok and heal.missing == () and heal.covered == ((100, 120), (120, 150))
    assert heal.restore({"bucket": "b"}) == {"location": {"bucket": "b"}, "end": 150}
    assert heal.why == ("retention gap: offsets 100..149 (50) are no longer on c1 orders[0]; restored from the "
                        "archive of c1")


@pytest.mark.parametrize(("coverage", "missing", "text"), [
    ([], [(100, 150)], "offsets 100..149 (50) of c1 orders[0] are in no archive (the archive of c1 holds none of "
                       "them of the lost 100..149)"),
    ([(0, 110), (120, 200)], [(110, 120)], "offsets 110..119 (10) of c1 orders[0] are in no archive (the archive "
                                           "of c1 holds 100..109, 120..149 of the lost 100..149)"),
    ([(105, 140)], [(100, 105), (140, 150)], "offsets 100..104, 140..149 (15) of c1 orders[0] are in no archive"),
    ([(0, 149)], [(149, 150)], "offset"),
])
def test_a_gap_the_archive_holds_in_part_names_exactly_the_offsets_it_lacks(coverage, missing, text):
    heal = plan_heal("c1", "orders", 0, 100, 150, coverage)
    assert not heal.ok and list(heal.missing) == missing
    assert text in heal.why and "nothing restored, the partition stops at 100" in heal.why
    assert heal.to_dict()["missing"] == [[a, b - 1] for a, b in missing]


def test_ranges_read_as_operators_read_offsets():
    assert ranges_text([(0, 10), (15, 16)]) == "0..9, 15"


def test_without_an_archive_of_the_source_the_others_are_named_for_a_restore_by_provenance():
    gaps = {("orders", 0): (10, 20)}
    [none] = heal_plans(None, ["c1"], "c1", gaps).values()
    assert not none.ok and "no archive is configured" in none.why and "offsets 10..19 (10)" in none.why
    [alone] = heal_plans({"bucket": "bkt"}, ["c2"], "c1", gaps).values()
    assert alone.ok and alone.by_origin == ("c2",)
    assert alone.restore({"bucket": "bkt"}) == {"location": {"bucket": "bkt"}, "end": 20, "by_origin": ["c2"]}
    assert ("c1 is not archived (topology key archive.clusters): what the link copies of them is looked for by "
            "provenance in the archives of c2") in alone.why
    partial = replace(plan_heal("c1", "orders", 0, 10, 20, [(0, 15)]), by_origin=("c2", "c3"))
    assert partial.ok and "the archive of c1 does not hold 15..19" in partial.why


def test_at_copy_time_a_gap_without_a_planned_restore_stops_the_partition_like_fail():
    start = copy_start(10, 20, on_gap="restore", source="c1")
    assert start.lost == 10 and start.error is not None
    assert "on_gap: restore: the next run restores them from the archive of c1" in start.error


def test_on_gap_restore_is_a_replication_setting_and_a_wrong_value_names_the_key():
    topo = parse_topology(BASE + "replication: {defaults: {on_gap: restore}}\narchive: {clusters: [c3]}\n")
    assert topo.link_settings("c1.L1").on_gap == "restore"  # c1 unarchived: c3's archive may hold it by provenance
    with pytest.raises(TopologyError, match="on_gap"):
        parse_topology(BASE + "replication: {defaults: {on_gap: heal}}\n")


def test_the_job_spec_carries_the_archive_location_hidden():
    spec = JobSpec(level=1, run_id="r", topics=("orders",), links=(LinkJob("c1.L1", 1, "c1", "c2", on_gap="restore"),),
                   clusters={"c1": {}, "c2": {}}, archive={"bucket": "bkt", "secret_access_key": "s3cr3t"},
                   archived=("c1",))
    back = JobSpec.from_json(spec.to_json())
    assert back == spec and back.links[0].on_gap == "restore"
    assert "s3cr3t" not in repr(spec)
