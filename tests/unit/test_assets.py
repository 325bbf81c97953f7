"""Mirrored data as assets (mirrorflow.assets, mirrorflow.completeness.proven): URIs, events, proven windows. Pure.

With Airflow and real clusters: tests/dags/test_audit_dag.py and tests/dags/test_level_dags.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mirrorflow.assets import arrival_uri, arrivals, first_address, proven_uri
from mirrorflow.completeness.compare import Verdict
from mirrorflow.completeness.proven import ProvenWindow, dropping_proofs, proven_windows, window_key
from mirrorflow.completeness.run import AuditResult, _reconcile
from mirrorflow.completeness.tally import Tallies, Tally, WindowKey
from mirrorflow.errors import TopologyError
from mirrorflow.topology import Topology

W = 600  # window seconds
T0 = 1_764_000_000_000 - 1_764_000_000_000 % (W * 1000)  # a window start
NOW = T0 + 3_600_000  # an hour later: T0's window is final


@pytest.mark.parametrize("servers, address", [
    ("127.0.0.1:9092", "127.0.0.1:9092"),
    ("b1.example:9093, b2.example:9093", "b1.example:9093"),
    ("SASL_SSL://b1:9094,SASL_SSL://b2:9094", "b1:9094"),
])
def test_an_arrival_asset_is_the_kafka_providers_uri_of_the_first_bootstrap_address(servers, address):
    assert first_address(servers) == address
    assert arrival_uri(servers, "orders") == f"kafka://{address}/orders"
    assert proven_uri("c3", "orders") == "mirrorflow-proven://c3/orders"
    with pytest.raises(ValueError, match="bootstrap address and a topic"):
        arrival_uri(servers, "")


def _partition(target="c2", topic="orders", partition=0, copied=3, **kw) -> dict:
    return {"link_id": "c1.L1", "source": "c1", "target": target, "topic": topic, "partition": partition,
            "copied": copied, "next_offset": 10 + partition, "target_last_offset": 20 + partition,
            "newest_ms": 1000 + partition, **kw}


def test_one_arrival_per_cluster_and_topic_that_got_records_saying_how_far_each_partition_reaches():
    found = arrivals([_partition(), _partition(partition=1), _partition(copied=0, partition=2),
                      _partition(target="c3", copied=0), _partition(target="c9")],
                     {"c2": "h2:9092", "c3": "h3:9092"}, run_id="r1")
    assert [(a.cluster, a.topic, a.uri) for a in found] == [("c2", "orders", "kafka://h2:9092/orders")]
    extra = found[0].extra
    assert extra["run_id"] == "r1" and extra["by"] == "level" and extra["records"] == 6 and extra["links"] == ["c1.L1"]
    assert extra["partitions"] == {"0": {"source": "c1", "source_offset": 10, "target_offset": 21, "newest_ms": 1000},
                                   "1": {"source": "c1", "source_offset": 11, "target_offset": 22, "newest_ms": 1001}}
    restored = arrivals([_partition(copied=0, restored=4, target_last_offset=None)], {"c2": "h2:9092"}, by="restore")
    assert restored[0].extra["by"] == "restore" and restored[0].extra["partitions"]["0"]["target_offset"] is None


def test_an_arrival_on_a_renaming_cluster_names_the_topic_as_the_cluster_does_and_the_logical_name_in_its_extra():
    from mirrorflow.naming import NameFormat

    found = arrivals([_partition(), _partition(target="c3")], {"c2": "h2:9092", "c3": "h3:9092"},
                     names={"c2": NameFormat.of("{tenant}-{topic}", {"tenant": "acme"})})
    assert [(a.cluster, a.topic, a.uri, a.extra.get("topic")) for a in found] == [
        ("c2", "orders", "kafka://h2:9092/acme-orders", "orders"), ("c3", "orders", "kafka://h3:9092/orders", None)]


def test_a_window_key_is_its_start_in_the_format_airflows_temporal_mappers_read():
    from airflow.partition_mappers.temporal import StartOfHourMapper  # the scheduler's side of the mapper

    assert window_key(T0) == datetime.fromtimestamp(T0 / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert StartOfHourMapper().to_downstream(window_key(T0)) == window_key(T0)[:13]


def _tallies(cells: dict[str, list[WindowKey]]) -> dict[str, Tallies]:
    out = {}
    for cluster, keys in cells.items():
        t = Tallies(W)
        for k in keys:
            t.cells[k] = Tally(1, 1)
        out[cluster] = t
    return out


def _proven(tallies, verdicts, announced=None, horizons=None, now=NOW):
    return proven_windows(tallies, verdicts, window_s=W, now_ms=now, grace_s=60, horizons=horizons or {},
                          announced=announced or {})


A, B = WindowKey("orders", "c1", T0), WindowKey("orders", "c2", T0)
BOTH = _tallies({"c1": [A, B], "c2": [A, B], "c3": [A, B]})


def test_a_window_is_proven_on_a_cluster_when_every_other_origins_cell_is_complete_there():
    ok = Verdict(1, 1, True)
    verdicts = {("c2", A): ok, ("c3", A): ok, ("c1", B): ok, ("c3", B): Verdict(1, 0, False)}
    assert _proven(BOTH, verdicts) == [ProvenWindow("c1", "orders", T0, 1), ProvenWindow("c2", "orders", T0, 1)]
    # announced once: a later run proves it again and says nothing; c3, mended, is proven then
    verdicts[("c3", B)] = ok
    assert _proven(BOTH, verdicts, announced={"c1": {("orders", T0)}, "c2": {("orders", T0)}}) == [
        ProvenWindow("c3", "orders", T0, 2)]


def test_nothing_is_proven_before_the_grace_period_beyond_the_horizons_or_without_a_verdict():
    ok = Verdict(1, 1, True)
    every = {(c, k): ok for c in ("c1", "c2", "c3") for k in (A, B) if k.origin != c}
    assert len(_proven(BOTH, every)) == 3
    assert _proven(BOTH, every, now=T0 + W * 1000 + 30_000) == []                  # within its grace period
    assert _proven(BOTH, every, now=T0 + 2 * 86_400_000) == []                     # ended more than a day ago
    assert _proven(BOTH, every, horizons={("c1", "orders"): T0 + 1}) == []         # an origin not counted then
    assert [p.cluster for p in _proven(BOTH, every, horizons={("c3", "orders"): T0 + 1})] == ["c1", "c2"]
    del every[("c3", A)]                                                           # deferred: no verdict yet
    assert [p.cluster for p in _proven(BOTH, every)] == ["c1", "c2"]


def test_a_window_of_a_clusters_own_messages_only_is_proven_there_once_final():
    own = _tallies({"c1": [A], "c2": [A]})
    assert _proven(own, {("c2", A): Verdict(1, 1, True)}) == [ProvenWindow("c1", "orders", T0, 0),
                                                               ProvenWindow("c2", "orders", T0, 1)]
    assert _proven(_tallies({"c1": [A], "c2": []}), {}) == [ProvenWindow("c1", "orders", T0, 0)]


def test_windows_proven_earlier_without_an_event_are_announced_again_those_with_one_are_marked_announced():
    earlier = [ProvenWindow("c1", "orders", T0, 3, again=True), ProvenWindow("c2", "orders", T0, 3, again=True)]
    result = AuditResult()
    again, confirmed = _reconcile(earlier, lambda windows: {windows[0]}, result)
    assert (again, confirmed) == ([earlier[1]], [earlier[0]]) and result.unconfirmed == 0
    # Airflow cannot be asked: neither announced again (it may hold the event) nor marked announced
    assert _reconcile(earlier, lambda windows: None, result) == ([], []) and result.unconfirmed == 2
    assert _reconcile(earlier, None, AuditResult()) == ([], [])
    assert _reconcile([], lambda windows: 1 / 0, AuditResult()) == ([], [])  # nothing to ask about


def test_proofs_are_said_dropped_once_the_last_audit_of_every_cluster_is_a_day_less_the_grace_ago():
    day, grace = 86_400_000, 900
    assert dropping_proofs(NOW, ["c3"], now_ms=NOW + day - grace * 1000, grace_s=grace) is None
    dropping = dropping_proofs(NOW, ["c3", "c2"], now_ms=NOW + day - grace * 1000 + 1, grace_s=grace)
    assert dropping is not None and dropping["unaudited"] == ["c2", "c3"]
    assert dropping["last_full_audit_ms"] == NOW and dropping["dropped_before_ms"] == NOW - grace * 1000 + 1
    assert dropping_proofs(None, ["c3"], now_ms=NOW + 9 * day, grace_s=grace) is None  # never recorded
    assert dropping_proofs(NOW, [], now_ms=NOW + 9 * day, grace_s=grace) is None       # every cluster audited


BASE = {"clusters": {c: {"bootstrap": f"127.0.0.1:{9000 + i}"} for i, c in enumerate(["c1", "c2"])},
        "tree": {"level": 1, "children": ["c1", "c2"]}}


def test_the_topics_with_proven_assets_are_the_plain_names_and_audit_assets():
    topology = Topology.parse({**BASE, "topics": ["orders", "payments\\..*", "stock\\.eu", "a.b"],
                               "audit": {"assets": ["payments.us"]}})
    assert topology.asset_topics() == ["orders", "payments.us", "stock.eu"]
    with pytest.raises(TopologyError) as caught:
        Topology.parse({**BASE, "topics": ["orders"], "audit": {"assets": ["orders", "refunds"]}})
    assert "audit.assets[1]" in str(caught.value) and "'refunds' is not a mirrored topic" in str(caught.value)
