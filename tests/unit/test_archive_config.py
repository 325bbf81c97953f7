"""The topology's ``archive`` key: validation, defaults, and removing an archived cluster."""

from __future__ import annotations

import pytest

from mirrorflow.errors import TopologyError
from mirrorflow.topology import Topology, parse_topology
from mirrorflow.topology.archive import ArchiveConfig

BASE = """
clusters:
  c1: {bootstrap: "127.0.0.1:9091"}
  c2: {bootstrap: "127.0.0.1:9092"}
  c3: {bootstrap: "127.0.0.1:9093"}
tree: {level: 3, children: [{level: 1, children: [c1, c2]}, c3]}
topics: [orders]
"""


def topo(archive: str = "") -> Topology:
    return parse_topology(BASE + (f"archive: {archive}\n" if archive else ""))


def refused(archive: str) -> TopologyError:
    with pytest.raises(TopologyError) as info:
        topo(archive)
    return info.value


def test_defaults():
    config = topo().archive
    assert (config.conn_id, config.schedule, config.clusters, config.prefix, config.max_records_per_run) == (
        "mirrorflow_archive", "1h", None, "mirrorflow", None)
    assert "archive" not in topo().to_dict()


def test_archived_defaults_to_every_leaf_in_tree_order():
    t = topo()
    assert t.archive.archived(t.leaves) == ["c1", "c2", "c3"]


def test_archived_keeps_tree_order_of_the_named_clusters():
    t = topo("{clusters: [c3, c1], schedule: '*/10 * * * *', prefix: backups/kafka, max_records_per_run: 500}")
    assert t.archive.archived(t.leaves) == ["c1", "c3"]
    assert (t.archive.schedule, t.archive.prefix, t.archive.max_records_per_run) == (
        "*/10 * * * *", "backups/kafka", 500)
    assert ArchiveConfig(clusters=["c2"]).archived(["c1", "c2", "c3"]) == ["c2"]


@pytest.mark.parametrize("archive, path", [("{clusters: [c9]}", "archive.clusters[0]"),
                                           ("{clusters: [c1, c9]}", "archive.clusters[1]")])
def test_an_unknown_cluster_is_named(archive, path):
    err = refused(archive)
    assert err.problems == ((path, "unknown cluster 'c9' (clusters: c1, c2, c3)"),)


@pytest.mark.parametrize("schedule, words", [("soon", "is not a duration"), ("1s", "shorter than the minimum 10s")])
def test_a_bad_schedule_is_named(schedule, words):
    err = refused(f"{{schedule: '{schedule}'}}")
    assert err.path == "archive.schedule"
    assert words in err.problem
    assert not err.problem.startswith("Value error")


@pytest.mark.parametrize("archive, path", [("{prefix: 'a b'}", "archive.prefix"),
                                           ("{max_records_per_run: 0}", "archive.max_records_per_run"),
                                           ("{bucket: x}", "archive.bucket"),
                                           ("{clusters: c1}", "archive.clusters")])
def test_other_bad_settings_are_named(archive, path):
    assert refused(archive).path == path


def test_without_cluster_removes_it_from_the_archived_ones():
    t = topo("{clusters: [c3, c1]}")
    after = t.without_cluster("c1")
    assert after.archive.clusters == ["c3"]
    assert after.archive.archived(after.leaves) == ["c3"]
    assert t.archive.clusters == ["c3", "c1"]  # the original is unchanged
    assert t.without_cluster("c2").archive.clusters == ["c3", "c1"]  # not archived: untouched


def test_without_cluster_keeps_the_default_of_every_cluster():
    after = topo().without_cluster("c2")
    assert after.archive.clusters is None
    assert after.archive.archived(after.leaves) == ["c1", "c3"]


def test_without_cluster_refuses_to_remove_the_only_archived_one():
    with pytest.raises(TopologyError) as info:
        topo("{clusters: [c1]}").without_cluster("c1")
    assert info.value.problems == (("archive.clusters", "'c1' is the only archived cluster; archive another first"),)
