"""What a level run copies: operator switches, replication windows, and the job spec built from them."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mirrorflow.copy.spec import JobSpec, LinkJob, build_spec, link_job
from mirrorflow.topology import parse_topology
from mirrorflow.topology.routes import ClosedLink, effective_links, split_by_window

DEMO = (Path(__file__).resolve().parents[2] / "topologies" / "demo.yaml").read_text(encoding="utf-8")

REPLICATION = """
replication:
  schedule: 1m
  defaults:
    windows: ["22:00-06:00"]
    max_bytes_per_second: 1000000
    txn_records: 2000
  links:
    c1.L3:
      windows: ["08:00-09:00", "13:00-14:00"]
      max_bytes_per_second: 5000
      max_records_per_run: 100
      max_bytes_per_run: 65536
    c2.L3:
      txn_records: 10
      exactly_once: false
  copy_threads: 6
"""

NOON = datetime(2024, 3, 10, 12, 0, tzinfo=UTC)
NIGHT = datetime(2024, 3, 10, 23, 0, tzinfo=UTC)

CLIENTS = {
    f"c{i}": {"bootstrap.servers": f"127.0.0.1:{19091 + i}", "sasl.password": f"secret-{i}"} for i in range(1, 5)
}


@pytest.fixture(scope="module")
def demo():
    return parse_topology(DEMO, "demo.yaml")


@pytest.fixture(scope="module")
def topo():
    return parse_topology(DEMO + REPLICATION, "demo+replication.yaml")


def ids(links) -> list[str]:
    return [link.link_id for link in links]


# --------------------------------------------------------------------------- effective_links


def test_no_stored_targets_means_topology_defaults(demo):
    links = effective_links(demo, 3)
    assert links == demo.links(3)
    assert {l.link_id: l.default_target for l in links} == {"c1.L3": "c3", "c2.L3": "c4", "c3.L3": "c1",
                                                           "c4.L3": "c2"}
    assert effective_links(demo, 3, {}) == links


def test_stored_targets_are_applied_and_keep_link_ids(demo):
    links = effective_links(demo, 3, {"c1.L3": "c4", "c3.L3": "c2", "c1.L1": "c2"})
    assert ids(links) == ["c1.L3", "c2.L3", "c3.L3", "c4.L3"]
    targets = {l.link_id: l.default_target for l in links}
    assert targets == {"c1.L3": "c4", "c2.L3": "c4", "c3.L3": "c2", "c4.L3": "c2"}
    switched = links[0]
    assert (switched.source, switched.level, switched.alternatives) == ("c1", 3, ("c3",))


def test_stored_target_equal_to_the_default_changes_nothing(demo, caplog):
    with caplog.at_level(logging.WARNING, logger="mirrorflow.topology.routes"):
        assert effective_links(demo, 3, {"c1.L3": "c3"}) == demo.links(3)
    assert not caplog.records


@pytest.mark.parametrize("stored", ["c2", "c1", "c9"])
def test_stored_target_outside_the_sibling_subtree_is_ignored_with_a_warning(demo, caplog, stored):
    with caplog.at_level(logging.WARNING, logger="mirrorflow.topology.routes"):
        links = effective_links(demo, 3, {"c1.L3": stored, "c2.L3": "c3"})
    assert {l.link_id: l.default_target for l in links}["c1.L3"] == "c3"     # default applies
    assert {l.link_id: l.default_target for l in links}["c2.L3"] == "c3"     # valid switch still applied
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert "c1.L3" in text and stored in text and "c3, c4" in text and "default target c3" in text


def test_stored_targets_of_other_levels_or_unknown_links_are_ignored(demo, caplog):
    with caplog.at_level(logging.WARNING, logger="mirrorflow.topology.routes"):
        links = effective_links(demo, 1, {"c1.L3": "c4", "gone.L1": "c1"})
    assert links == demo.links(1)
    assert not caplog.records


def test_unknown_level_has_no_links(demo):
    assert effective_links(demo, 2, {"c1.L3": "c4"}) == []


# --------------------------------------------------------------------------- split_by_window


def test_no_windows_means_every_link_is_open(demo):
    open_, closed = split_by_window(demo, demo.links(3), NOON)
    assert open_ == demo.links(3) and closed == []


def test_split_by_window_at_noon(topo):
    links = effective_links(topo, 3, {"c1.L3": "c4"})
    open_, closed = split_by_window(topo, links, NOON)
    assert open_ == []
    by_id = {c.link_id: c for c in closed}
    assert list(by_id) == ["c1.L3", "c2.L3", "c3.L3", "c4.L3"]
    assert by_id["c1.L3"] == ClosedLink("c1.L3", NOON.replace(hour=13), ("08:00-09:00", "13:00-14:00"))
    for link_id in ("c2.L3", "c3.L3", "c4.L3"):   # the defaults' window
        assert by_id[link_id] == ClosedLink(link_id, NOON.replace(hour=22), ("22:00-06:00",))


def test_split_by_window_at_night(topo):
    links = effective_links(topo, 3, {"c1.L3": "c4"})
    open_, closed = split_by_window(topo, links, NIGHT)
    assert ids(open_) == ["c2.L3", "c3.L3", "c4.L3"]
    assert open_[0] is links[1]                      # the switched/effective links themselves come back
    assert closed == [ClosedLink("c1.L3", datetime(2024, 3, 11, 8, 0, tzinfo=UTC), ("08:00-09:00", "13:00-14:00"))]


@pytest.mark.parametrize("now, open_ids", [
    (NOON.replace(hour=8), ["c1.L3"]),                                 # start inclusive
    (NOON.replace(hour=8, minute=59, second=59), ["c1.L3"]),
    (NOON.replace(hour=9), []),                                        # end exclusive
    (NOON.replace(hour=6), []),
    (NOON.replace(hour=5, minute=59), ["c2.L3", "c3.L3", "c4.L3"]),
    (NOON.replace(hour=22), ["c2.L3", "c3.L3", "c4.L3"]),
])
def test_split_by_window_boundaries(topo, now, open_ids):
    open_, closed = split_by_window(topo, topo.links(3), now)
    assert ids(open_) == open_ids
    assert sorted(ids(open_) + [c.link_id for c in closed]) == sorted(ids(topo.links(3)))
    assert all(c.next_open > now and c.next_open - now <= timedelta(hours=24) for c in closed)


# --------------------------------------------------------------------------- build_spec


def test_build_spec_includes_only_the_needed_clusters(topo):
    links = [topo.link("c1.L3"), topo.link("c2.L3")]
    spec = build_spec(topo, 3, "run-1", links, CLIENTS, slots=8)
    assert isinstance(spec, JobSpec)
    assert (spec.level, spec.run_id, spec.slots) == (3, "run-1", 8)
    assert spec.topics == ("orders", "payments\\..*")
    assert set(spec.clusters) == {"c1", "c2", "c3", "c4"}
    spec = build_spec(topo, 1, "run-2", [topo.link("c1.L1")], CLIENTS)
    assert set(spec.clusters) == {"c1", "c2"}
    assert spec.clusters["c1"] == CLIENTS["c1"] and spec.slots is None


def test_build_spec_follows_switched_targets(topo):
    links = effective_links(topo, 3, {"c1.L3": "c4"})[:1]
    spec = build_spec(topo, 3, "r", links, CLIENTS)
    assert set(spec.clusters) == {"c1", "c4"}
    assert spec.links == (LinkJob("c1.L3", 3, "c1", "c4", max_bytes_per_second=5000, max_records_per_run=100,
                                  max_bytes_per_run=65536, txn_records=2000, switched=True,
                                  windows=("08:00-09:00", "13:00-14:00")),)


def test_build_spec_carries_the_link_settings(topo):
    spec = build_spec(topo, 3, "r", topo.links(3), CLIENTS)
    jobs = {job.link_id: job for job in spec.links}
    assert list(jobs) == ["c1.L3", "c2.L3", "c3.L3", "c4.L3"]
    assert jobs["c1.L3"] == LinkJob("c1.L3", 3, "c1", "c3", max_bytes_per_second=5000, max_records_per_run=100,
                                    max_bytes_per_run=65536, txn_records=2000,
                                    windows=("08:00-09:00", "13:00-14:00"))
    assert jobs["c2.L3"] == LinkJob("c2.L3", 3, "c2", "c4", max_bytes_per_second=1000000, txn_records=10,
                                    exactly_once=False, windows=("22:00-06:00",))
    assert jobs["c4.L3"] == LinkJob("c4.L3", 3, "c4", "c2", max_bytes_per_second=1000000, txn_records=2000,
                                    windows=("22:00-06:00",))
    # the windows travel in the spec's JSON (the copy stops when the one it runs in closes)
    assert JobSpec.from_json(spec.to_json()).links == spec.links


def test_link_job_without_replication_settings(demo):
    assert link_job(demo, demo.link("c3.L1")) == LinkJob("c3.L1", 1, "c3", "c4")
    assert link_job(demo, demo.link("c3.L1")).exactly_once is True
    assert build_spec(demo, 1, "r", [], {}).copy_threads == 4


def test_build_spec_carries_copy_threads(topo):
    assert build_spec(topo, 3, "r", topo.links(3), CLIENTS).copy_threads == 6


@pytest.mark.parametrize("text, key", [
    ("replication:\n  copy_threads: 0\n", "replication.copy_threads"),
    ("replication:\n  copy_threads: many\n", "replication.copy_threads"),
    ("replication:\n  defaults: {exactly_once: 'no'}\n", "replication.defaults.exactly_once"),
])
def test_bad_copy_settings_are_refused_naming_the_key(text, key):
    from mirrorflow.errors import TopologyError

    with pytest.raises(TopologyError, match=key.replace(".", "\\.")):
        parse_topology(DEMO + text, "demo.yaml")


def test_build_spec_with_no_links(topo):
    spec = build_spec(topo, 3, "r", [], {})
    assert spec.links == () and dict(spec.clusters) == {}


def test_build_spec_refuses_missing_client_settings(topo):
    clients = {name: CLIENTS[name] for name in ("c1", "c2")}
    with pytest.raises(ValueError, match="no client settings for cluster\\(s\\) c3, c4"):
        build_spec(topo, 3, "r", [topo.link("c1.L3"), topo.link("c2.L3")], clients)
    with pytest.raises(ValueError, match="c4"):
        build_spec(topo, 3, "r", effective_links(topo, 3, {"c1.L3": "c4"})[:1], {"c1": {}, "c3": {}})


def test_spec_from_build_spec_survives_json(topo):
    spec = build_spec(topo, 3, "r", effective_links(topo, 3, {"c3.L3": "c2"}), CLIENTS, slots=2)
    assert JobSpec.from_json(spec.to_json()) == spec
