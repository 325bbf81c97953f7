"""The watcher of ``on_data`` levels against real brokers: what it counts as waiting, and when its trigger fires.

The watcher measures end offsets and checkpoints only. What matters on real
clusters: records produced wait on exactly the links that must take them; the
copies a run writes wait on the links that will skip them (copy flags), until a
run has; once the tree has converged nothing waits, so the watcher goes quiet
instead of starting runs forever (transaction markers left behind by the copies
must not count); records behind an open transaction do not count until it
commits. The trigger itself runs here in-process, as the triggerer runs it
(without its supervisor: the queued-runs question answers 0). Under the real
scheduler and triggerer: tests/e2e/standalone/test_data_triggered_levels.py.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from mirrorflow_airflow.factories.levels import build_level_dag, level_schedule
from mirrorflow_airflow.triggers.base import CheckContext
from mirrorflow_airflow.triggers.data import LevelDataTrigger, measure_level, pending_uri
from tests.dags.watcher import ON_DATA, Fired
from tests.integration.kafka_io import produce
from tests.integration.mirroring import FOUR, clients, converge, run_level, topic_everywhere, topology

pytestmark = [pytest.mark.airflow, pytest.mark.kafka, pytest.mark.usefixtures("airflow_home", "operator_state")]

def _waiting(topo, level: int) -> dict[str, int]:
    return measure_level(level, CheckContext(topo)).records


def test_records_wait_on_the_links_that_take_them_and_nothing_waits_once_the_tree_converged(
        kafka_clusters, make_topic):
    topic = topic_everywhere(make_topic, partitions=2)
    topo = topology(kafka_clusters, FOUR, [topic], extra=ON_DATA)
    settings = clients(kafka_clusters, topo)
    assert topo.replication.on_data_at(1) and topo.replication.on_data_at(3)
    assert (_waiting(topo, 1), _waiting(topo, 3)) == ({}, {})

    produce(kafka_clusters["c1"].bootstrap, topic, [(b"k", f"c1-{i}".encode(), None, None) for i in range(10)],
            partition=0)
    assert (_waiting(topo, 1), _waiting(topo, 3)) == ({"c1.L1": 10}, {"c1.L3": 10})

    assert run_level(topo, 1, settings).copied == 10
    # c1.L1 passed them; on c2 the 10 copies wait on the links that will skip them (c2.L1 back, c2.L3 across):
    # offsets, so the copies' transaction markers count here, until a run has read past them
    one, three = _waiting(topo, 1), _waiting(topo, 3)
    assert set(one) == {"c2.L1"} and one["c2.L1"] > 10
    assert set(three) == {"c1.L3", "c2.L3"} and three["c1.L3"] == 10 and three["c2.L3"] == one["c2.L1"]

    converge(topo, settings)
    assert (_waiting(topo, 1), _waiting(topo, 3)) == ({}, {})  # copies' transaction markers do not count

    # an open transaction on c3: its records do not wait (no copy can pass them) until it commits
    producer = Producer({"bootstrap.servers": kafka_clusters["c3"].bootstrap,
                         "transactional.id": f"open-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"c3-txn-{i}".encode(), partition=1)
    producer.flush(30)
    assert _waiting(topo, 1) == {}
    producer.commit_transaction(30)
    del producer
    assert _waiting(topo, 1) == {"c3.L1": 4}  # 3 records and the commit marker


def test_the_trigger_fires_once_for_what_waits_again_for_new_records_and_not_before_its_floor(
        kafka_clusters, make_topic, monkeypatch, tmp_path):
    topic = topic_everywhere(make_topic, ("c1", "c2"), partitions=1)
    topo = topology(kafka_clusters, "\n  level: 1\n  children: [c1, c2]\n", [topic], names=("c1", "c2"),
                    extra=ON_DATA)
    path = tmp_path / "topology.yaml"
    path.write_text(topo.to_yaml())
    monkeypatch.setenv("MIRROR_TOPOLOGY", str(path))  # the trigger reads the topology as the triggerer does

    # the level DAG is scheduled on the watched asset, whose trigger is this one
    [asset] = level_schedule(topo, 1)
    assert type(build_level_dag(topo, 1).timetable).__name__ == "AssetTriggeredTimetable"
    assert asset.uri == pending_uri(1)
    trigger = asset.watchers[0].trigger
    assert isinstance(trigger, LevelDataTrigger)
    assert trigger.serialize()[1] == {"level": 1, "dag_id": "mirror_level_1", "poll_s": 0.5, "floor_s": 2.0,
                                      "resend_s": 60.0, "backoff_s": 10.0, "backoff_cap_s": 300.0, "tree": ""}

    fired = Fired(trigger)
    try:
        assert fired.next(2.0) is None  # nothing waits: quiet
        produce(kafka_clusters["c1"].bootstrap, topic, [(b"k", b"a", None, None)], partition=0)
        first = fired.next(10.0)
        at = time.monotonic()
        assert first is not None and first.payload["records"] == {"c1.L1": 1}, first
        # new records at once: a new event, but only once the floor (2 s) has passed since the first
        produce(kafka_clusters["c1"].bootstrap, topic, [(b"k", b"b", None, None)], partition=0)
        second = fired.next(10.0)
        assert second is not None and second.payload["records"] == {"c1.L1": 2}, second
        assert time.monotonic() - at >= 2.0 - 0.5  # one poll's slack
        # the same offsets still wait (no run took them): no third event before the resend interval
        assert fired.next(3.0) is None
        # a run takes them: nothing waits, and the next record is news again
        assert run_level(topo, 1, clients(kafka_clusters, topo)).copied == 2
        produce(kafka_clusters["c2"].bootstrap, topic, [(b"k", b"c", None, None)], partition=0)
        third = fired.next(10.0)
        # the 2 copies to skip (and their transaction's marker), and the new one
        assert third is not None and set(third.payload["records"]) == {"c2.L1"}, third
    finally:
        fired.close()
