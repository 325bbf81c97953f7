"""One sick partition stays alone (issue 44, part 5), through the level DAG under dag.test() on real brokers.

- a source partition without a leader (a three-node source, the node holding its
  only replica stopped) fails alone: the link's other partitions and topics copy;
- a partition stopped by ``on_gap: fail``: the run is red, yet the healthy topic's
  arrival event is registered (by ``announce``, a teardown that runs after the
  failed copy) and a user's DAG on that ``arrived`` asset is due to run;
- the ``on_data`` watcher reads what the run recorded as failing, and asks for runs
  for the sick partition less and less often, while records on a healthy topic
  start a run at once.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.lag.backoff import Failing
from mirrorflow.topology import parse_topology
from mirrorflow_airflow.assets import arrived
from mirrorflow_dev.dag_parsing import parsed
from tests.dags.dag_runs import asset_events, level_1_dag, one_way_pair, task_state, xcom
from tests.dags.watcher import Fired
from tests.integration.kafka_io import produce, read_all

pytestmark = [pytest.mark.airflow, pytest.mark.kafka,
              pytest.mark.usefixtures("spark_default_connect", "airflow_home", "operator_state")]

_pause = threading.Event()  # never set: .wait(t) paces the watch loops, each with a deadline


def _records(bootstrap: str, topic: str, n: int, first: int = 0, partition: int = 0) -> None:
    produce(bootstrap, topic, [(b"k", f"{topic}-{partition}-{i}".encode(), None, None)
                               for i in range(first, first + n)], partition=partition)


def _user_dag(asset, dag_id: str):
    """A user's DAG scheduled on ``asset`` into the metadata database and unpaused, as a deployment has it."""
    from airflow.models.dag import DagModel
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG
    from airflow.utils.session import create_session

    with DAG(dag_id, schedule=[asset]) as dag:
        EmptyOperator(task_id="load")
    parsed(dag)
    with create_session() as session:
        session.get(DagModel, dag_id).is_paused = False
    return dag


def _due_by_assets() -> set[str]:
    """The DAGs the scheduler would start now because their assets got events (its own query)."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        _, triggered = DagModel.dags_needing_dagruns(session)
        return set(triggered)


def test_a_gap_stopped_partition_fails_the_run_red_yet_the_healthy_topic_arrives_and_the_watcher_backs_off(
        kafka_clusters, make_topic, monkeypatch, tmp_path, caplog):
    from airflow.models import Variable

    from mirrorflow_airflow.state import FAILING_PREFIX, read_failing
    from mirrorflow_airflow.triggers.data import LevelDataTrigger

    healthy, sick = make_topic("c1"), make_topic("c1")
    c1, c2 = kafka_clusters["c1"].bootstrap, kafka_clusters["c2"].bootstrap
    text = one_way_pair(c1, c2, "c2", f"{healthy}|{sick}", defaults="{on_gap: fail}")
    topo = parse_topology(text, source="test")
    level = parsed(level_1_dag(text))
    for topic in (healthy, sick):
        _records(c1, topic, 10)
    first = level.test()
    assert first.state == "success" and xcom(first, "copy")["copied"] == 20, xcom(first, "copy")

    # a retention gap on the sick topic: offsets 10..14 deleted before the link copied them
    _records(c1, sick, 10, first=10)
    admin = AdminClient({"bootstrap.servers": c1})
    [done] = admin.delete_records([TopicPartition(sick, 0, 15)], request_timeout=30).values()
    done.result(timeout=30)
    _records(c1, healthy, 5, first=10)
    user = _user_dag(arrived("c2", healthy, topo), f"user_on_{healthy}")
    assert user.dag_id not in _due_by_assets()

    run = level.test()
    summary = xcom(run, "copy")
    assert run.state == "failed", summary  # red: a partition failed
    assert task_state(run, "copy") == "failed" and task_state(run, "announce") == "success"
    assert [e["topic"] for e in summary["error_details"]] == [sick], summary["errors"]
    assert summary["copied"] == 5
    # the healthy topic advanced: its event is registered, and the user's DAG on it is due
    uri = f"kafka://{c2}/{healthy}"
    [(_, extra, by_task)] = asset_events(uri, run, by_task=True)
    assert by_task == "announce" and extra["records"] == 5 and extra["run_id"] == run.run_id
    assert asset_events(f"kafka://{c2}/{sick}", run) == []
    assert user.dag_id in _due_by_assets()
    assert [r.value.decode() for r in read_all(c2, healthy, 1)] == [f"{healthy}-0-{i}" for i in range(15)]
    # what failed is recorded for the watcher
    recorded = read_failing("", 1)
    assert recorded is not None and recorded.keys == frozenset({("c1.L1", sick, 0)}), recorded

    # the watcher: records keep coming on the sick partition alone; its runs fall off (1 s, 2 s, 4 s, ...)
    path = tmp_path / "topology.yaml"
    path.write_text(topo.to_yaml())
    monkeypatch.setenv("MIRROR_TOPOLOGY", str(path))
    fired = Fired(LevelDataTrigger(level=1, dag_id="mirror_level_1", poll_s=0.1, floor_s=0.3,
                                   backoff_s=1.0, backoff_cap_s=4.0))
    try:
        events, runs, started = [], 0, time.monotonic()
        while time.monotonic() - started < 10.0:
            _records(c1, sick, 1, first=100 + len(events) * 100 + runs)  # new offsets at every turn
            event = fired.next(0.2)
            if event is not None:
                events.append(time.monotonic() - started)
                runs += 1  # the run it asked for fails the partition again, as the copy task records it
                Variable.set(f"{FAILING_PREFIX}1", json.dumps(Failing(f"simulated-{runs}", recorded.keys).to_dict()))
        gaps = [round(b - a, 1) for a, b in zip(events, events[1:])]
        # without the back-off: one run per floor (0.3 s), some 30 in 10 s; with it, gaps of 1, 2, 4, 4 s
        assert 2 <= len(events) <= 6, (events, gaps)
        assert all(g >= 0.9 for g in gaps) and gaps == sorted(gaps), gaps
        assert "failed in 1 run(s) in a row" in caplog.text
        # a healthy topic's new records start a run at once, back-off or not
        _records(c1, healthy, 1, first=15)
        at = time.monotonic()
        event = fired.next(3.0)
        assert event is not None and time.monotonic() - at < 1.5, event
        assert "more on failing partitions, retried with them" in event.payload["why"]
    finally:
        fired.close()
        Variable.delete(f"{FAILING_PREFIX}1")


def test_a_source_partition_without_a_leader_fails_alone_and_the_rest_of_the_link_copies(
        kafka_clusters, three_nodes):  # noqa: F811 (the fixture)
    bootstrap = ",".join(n.bootstrap for n in three_nodes)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    split, other = f"split-{int(time.time() * 1000)}", f"other-{int(time.time() * 1000)}"
    # split[0] on node 1, split[1] on node 2 (only replica), other[0] on node 3
    for future in admin.create_topics([NewTopic(split, num_partitions=2, replica_assignment=[[1], [2]]),
                                       NewTopic(other, num_partitions=1, replica_assignment=[[3]])]).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 30
    while any(p.leader < 0 for t in (split, other) for p in admin.list_topics(t, timeout=10).topics[t].partitions
              .values()):
        assert time.monotonic() < deadline, "the new topics never got their leaders"
        _pause.wait(0.2)
    for p in (0, 1):
        _records(bootstrap, split, 20, partition=p)
    _records(bootstrap, other, 20)
    c2 = kafka_clusters["c2"].bootstrap
    level = level_1_dag(one_way_pair(bootstrap, c2, "c2", f"{split}|{other}"))

    three_nodes[1].stop()  # node 2: split[1] has no leader now
    deadline = time.monotonic() + 60
    while admin.list_topics(split, timeout=10).topics[split].partitions[1].leader != -1:
        assert time.monotonic() < deadline, "the controller never took the leader away"
        _pause.wait(0.2)

    started = time.monotonic()
    run = level.test()
    summary = xcom(run, "copy")
    assert run.state == "failed", summary
    [error] = summary["errors"]
    assert error.startswith(f"c1.L1 (c1 -> c2) {split}[1]: c1 {split}[1] has no leader (its broker is down?): its "
                            f"offsets could not be read ("), error
    assert error.endswith("); not copied in this run, nothing written; the link's other partitions copy on"), error
    assert summary["copied"] == 40, summary  # split[0] and other[0]
    assert sorted(r.value.decode() for r in read_all(c2, other, 1)) == sorted(f"{other}-0-{i}" for i in range(20))
    assert [r.value.decode() for r in read_all(c2, split, 2) if r.partition == 0] == [
        f"{split}-0-{i}" for i in range(20)]
    # bounded: measured at about 62 s on a loaded 2-core machine, most of it outside the offsets read (open question)
    assert time.monotonic() - started < 180
