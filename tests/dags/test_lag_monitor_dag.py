"""mirror_lag_monitor, the lag sensors and their triggers, under Airflow's own dag.test() against real brokers.

dag.test() in Airflow 3.3 runs a deferred task's trigger in-process
(``_run_task(..., run_triggerer=True)`` -> ``InProcessTestSupervisor.run_trigger_in_process``):
the trigger is rebuilt from its serialized kwargs, its ``run()`` is driven with
``asyncio.run`` until the first event, and the task resumes in
``execute_complete``. The sensor test below checks that this path really ran
(the "[DAG TEST] running trigger in line" record, and the poll count only the
trigger reports). The trigger's ``run()`` is also driven directly with asyncio.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from airflow.sdk import DeltaTriggerTimetable
from confluent_kafka import TopicPartition

from mirrorflow.errors import MirrorflowError
from mirrorflow.topology import Topology
from mirrorflow_airflow.factories.dag_header import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.factories.lag_monitor import DAG_ID, build_lag_monitor_dag
from mirrorflow_airflow.state import LAG_SNAPSHOT_VARIABLE
from mirrorflow_airflow.triggers.base import PollingTrigger
from mirrorflow_airflow.triggers.lag import ConsumerGroupLagTrigger, ReplicationLagTrigger
from tests.dags.dag_runs import states, task_output, xcom
from tests.integration.groups import commit
from tests.integration.mirroring import clients, converge

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

HOUR_MS = 3600_000
SECRET = "s3cr3t-never-in-a-trigger"
PAIR = "\n  level: 1\n  children: [c1, c2]\n"
PAIR_NAMES = ("c1", "c2")


@pytest.fixture
def stored_snapshot(airflow_home):
    """Read the snapshot Variable the way the UI and other tasks see it (the metadata DB); cleared afterwards."""
    from airflow.models import Variable
    from airflow.utils.session import create_session

    def read() -> tuple[dict, str | None]:
        with create_session() as session:
            row = session.query(Variable).filter_by(key=LAG_SNAPSHOT_VARIABLE).one()
            return json.loads(row.val), row.description

    yield read
    Variable.delete(LAG_SNAPSHOT_VARIABLE)


@pytest.fixture
def db_connection(airflow_home):
    """Store an Airflow connection in the metadata DB (not the environment); removed afterwards."""
    from airflow.models import Connection
    from airflow.utils.session import create_session

    ids = []

    def add(conn_id: str, extra: dict) -> None:
        with create_session() as session:
            session.add(Connection(conn_id=conn_id, conn_type="kafka", extra=json.dumps(extra)))
        ids.append(conn_id)

    yield add
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id.in_(ids)).delete(synchronize_session=False)


def trigger_rows() -> list:
    """Every trigger row in the metadata DB: classpath and kwargs as stored."""
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session

    with create_session() as session:
        return [(t.classpath, str(t.kwargs)) for t in session.query(Trigger).all()]


def sensor_dag(dag_id: str, folder, sensor_factory):
    """A one-task DAG built here, serialized into the metadata DB as the dag-processor would (dag.test() needs that)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.sdk import DAG
    from airflow.utils.session import create_session

    with DAG(dag_id, schedule=None, start_date=START_DATE, catchup=False, tags=tags("test"),
             default_args={**DEFAULT_ARGS, "retries": 0}) as dag:
        sensor_factory()
    empty = folder / "no-dag-files"
    empty.mkdir(exist_ok=True)
    bag = DagBag(dag_folder=str(empty))
    bag.bag_dag(dag)
    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)  # the DAG row refers to its bundle
    sync_bag_to_db(bag, "dags-folder", None)
    return dag


# --------------------------------------------------------------------------- the monitor DAG


def test_the_dag_file_builds_the_monitor_from_the_topology(dagbag):
    dag = dagbag.get_dag(DAG_ID)
    assert dag is not None, sorted(dagbag.dag_ids)
    assert {t.task_id for t in dag.tasks} == {"measure", "check"}
    assert dag.max_active_runs == 1 and not dag.catchup
    assert dag.timetable == DeltaTriggerTimetable(timedelta(minutes=1))  # lag.schedule's default, 1m


def test_monitor_stores_a_readable_snapshot_and_audits_the_totals(pending, stored_snapshot, caplog):
    topo, topic = pending()
    caplog.set_level(logging.INFO)
    run = build_lag_monitor_dag(topo).test()
    assert states(run) == {"measure": "success", "check": "success"}

    snapshot, description = stored_snapshot()
    assert "mirror_lag_monitor" in description
    assert xcom(run, "measure") == snapshot  # the same snapshot for downstream tasks
    rows = {(r["link_id"], r["topic"], r["partition"]): r for r in snapshot["links"]}
    row = rows[("c1.L1", topic, 0)]
    assert (row["records"], row["checkpoint"], row["end"]) == (5, None, 5)
    assert abs(row["seconds"] - 3600) < 60
    assert rows[("c2.L1", topic, 0)]["records"] == 0
    assert snapshot["per_link"]["c1.L1"]["records"] == 5 and snapshot["per_link"]["c1.L1"]["target"] == "c2"
    assert snapshot["ok"] and snapshot["violations"] == [] and snapshot["unreachable"] == {}
    assert snapshot["totals"]["link_records"] == 5  # only this topology's topic is selected

    audits = [json.loads(r.getMessage()) for r in caplog.records
              if r.name == "mirrorflow.audit" and '"event":"lag_snapshot"' in r.getMessage()]
    assert len(audits) == 1 and audits[0]["totals"]["link_records"] == 5 and audits[0]["ok"] is True
    assert "c1.L1" in caplog.text and "records pending" in caplog.text  # the per-link table in the task log


def test_monitor_fails_past_the_sla_naming_link_topic_and_partition(pending, stored_snapshot, caplog, capfd):
    topo, topic = pending(extra="lag: {sla: {records: 0}}\n")
    run = build_lag_monitor_dag(topo).test()  # production retries: the check must fail without using them
    assert states(run) == {"measure": "success", "check": "failed"}
    assert run.state == "failed"
    expected = f"link c1.L1 (c1 -> c2) {topic}[0]: 5 records > 0"
    snapshot, _ = stored_snapshot()
    assert snapshot["ok"] is False and snapshot["violations"] == [expected]
    output = task_output(caplog, capfd)
    assert "LagSlaExceeded: lag SLA exceeded: 1 violation(s)" in output and f"  - {expected}" in output


# --------------------------------------------------------------------------- sensors under dag.test()


def test_deferrable_replication_lag_sensor_waits_in_the_trigger_until_converged(pending, kafka_clusters, caplog,
                                                                                 capfd, tmp_path, db_connection):
    from mirrorflow_airflow.sensors.lag import ReplicationLagSensor

    topo, topic = pending()
    # c2 is named by an Airflow connection stored in the metadata DB, with a credential: the trigger must
    # resolve it itself (through the supervisor, from its worker thread) and never carry or log it
    data = topo.to_dict()
    data["clusters"]["c2"] = {"conn_id": "mf_lag_c2"}
    Path(os.environ["MIRROR_TOPOLOGY"]).write_text(Topology.parse(data).to_yaml(), encoding="utf-8")
    db_connection("mf_lag_c2", {"bootstrap.servers": kafka_clusters["c2"].bootstrap, "sasl.username": "mirror",
                                "sasl.password": SECRET})
    dag = sensor_dag("mirror_test_lag_sensor", tmp_path, lambda: ReplicationLagSensor(
        task_id="wait", links=["c1.L1"], max_records=0, poke_interval=0.5, timeout=120))

    trigger_started, test_over = threading.Event(), threading.Event()

    class Watch(logging.Handler):
        """Observes dag.test()'s own record that it now runs the deferred task's trigger."""

        def emit(self, record: logging.LogRecord) -> None:
            if "running trigger in line" in record.getMessage():
                trigger_started.set()

    dag_logger = logging.getLogger("airflow.sdk.definitions.dag")
    caplog.set_level(logging.INFO, logger=dag_logger.name)
    watch = Watch()
    dag_logger.addHandler(watch)
    errors: list[BaseException] = []

    def copy_once_deferred() -> None:
        """Converge only once the sensor has deferred: its first check in the worker must see the lag."""
        deadline = time.monotonic() + 90
        while not trigger_started.wait(0.2):
            if test_over.is_set() or time.monotonic() > deadline:
                errors.append(AssertionError("the sensor never deferred to its trigger"))
                return
        try:
            converge(topo, clients(kafka_clusters, topo))
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    worker = threading.Thread(target=copy_once_deferred, daemon=True)
    worker.start()
    try:
        run = dag.test()
    finally:
        test_over.set()
        dag_logger.removeHandler(watch)
        worker.join(120)
    assert not errors, errors
    assert states(run) == {"wait": "success"}
    event = xcom(run, "wait")
    assert event["status"] == "done" and event["polls"] >= 1, event  # only the trigger counts polls
    assert event["records"] == 0 and event["links"] == ["c1.L1"] and event["targets"] == {"c1.L1": "c2"}
    assert SECRET not in task_output(caplog, capfd) + json.dumps(trigger_rows())


def test_deferred_sensor_times_out_with_the_lag_table(pending, caplog, capfd, tmp_path):
    from mirrorflow_airflow.sensors.lag import ReplicationLagSensor

    topo, topic = pending()
    dag = sensor_dag("mirror_test_lag_sensor_timeout", tmp_path, lambda: ReplicationLagSensor(
        task_id="wait", topics=[topic], max_records=0, poke_interval=0.5, timeout=2))
    run = dag.test()
    assert states(run) == {"wait": "failed"}
    output = task_output(caplog, capfd)
    assert "AirflowSensorTimeout" in output and "timed out after 2.0s" in output
    assert f"link c1.L1 (c1 -> c2) {topic}[0]: 5 records > 0" in output  # what was still behind


def test_consumer_group_lag_sensor_in_poke_mode(pending, kafka_clusters, caplog, capfd, tmp_path):
    from mirrorflow_airflow.sensors.lag import ConsumerGroupLagSensor

    topo, topic = pending()
    bootstrap = kafka_clusters["c1"].bootstrap
    done_group, behind_group = f"{topic}-done", f"{topic}-behind"
    for group, offset in ((done_group, 5), (behind_group, 2)):
        commit(bootstrap, group, [TopicPartition(topic, 0, offset)])

    ok = sensor_dag("mirror_test_group_lag_ok", tmp_path, lambda: ConsumerGroupLagSensor(
        task_id="wait", cluster="c1", groups=[done_group], deferrable=False, poke_interval=0.5, timeout=30))
    run = ok.test()
    assert states(run) == {"wait": "success"}
    assert xcom(run, "wait")["groups"] == [done_group]

    behind = sensor_dag("mirror_test_group_lag_behind", tmp_path, lambda: ConsumerGroupLagSensor(
        task_id="wait", cluster="c1", groups=[f"{topic}-be.*"], deferrable=False, poke_interval=0.5, timeout=2))
    run = behind.test()
    assert states(run) == {"wait": "failed"}
    output = task_output(caplog, capfd)
    assert "AirflowSensorTimeout" in output
    assert f"group {behind_group} on c1 {topic}[0]: 3 records > 0" in output


# --------------------------------------------------------------------------- triggers driven directly


def drive(trigger: PollingTrigger) -> dict:
    """Rebuild the trigger from its serialized form (as the triggerer does) and run it to its first event."""
    classpath, kwargs = trigger.serialize()
    json.dumps(kwargs)  # stored in the metadata database: plain JSON
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)

    async def first_event():
        return await anext(rebuilt.run())

    return asyncio.run(first_event()).payload


def test_replication_lag_trigger_times_out_with_the_table_then_fires_once_caught_up(pending, kafka_clusters):
    topo, topic = pending()
    timed_out = drive(ReplicationLagTrigger(links=["c1.L1"], poll_interval=0.2, deadline=time.time() + 1))
    assert timed_out["status"] == "timeout" and timed_out["polls"] >= 1
    assert timed_out["records"] == 5 and timed_out["lagging"] == [f"link c1.L1 (c1 -> c2) {topic}[0]: 5 records > 0"]
    assert topic in timed_out["table"]

    converge(topo, clients(kafka_clusters, topo))
    done = drive(ReplicationLagTrigger(links=["c1.L1"], topics=[topic], poll_interval=0.2,
                                       deadline=time.time() + 60))
    assert (done["status"], done["polls"], done["records"]) == ("done", 1, 0)


def test_group_lag_trigger_fires_when_the_group_commits_to_the_end(pending, kafka_clusters):
    topo, topic = pending()
    group, bootstrap = f"{topic}-g", kafka_clusters["c1"].bootstrap
    commit(bootstrap, group, [TopicPartition(topic, 0, 1)])
    behind = drive(ConsumerGroupLagTrigger(cluster="c1", groups=[group], max_records=3, poll_interval=0.2,
                                           deadline=time.time() + 1))
    assert behind["status"] == "timeout"
    assert behind["lagging"] == [f"group {group} on c1 {topic}[0]: 4 records > 3"]

    commit(bootstrap, group, [TopicPartition(topic, 0, 2)])
    within = drive(ConsumerGroupLagTrigger(cluster="c1", groups=[group], max_records=3, poll_interval=0.2,
                                           deadline=time.time() + 60))
    assert within["status"] == "done" and within["records"] == 3


def test_trigger_reports_a_failing_check_as_an_error_event(pending):
    pending()
    event = drive(ReplicationLagTrigger(links=["c9.L1"], poll_interval=0.1, max_errors=2,
                                        deadline=time.time() + 30))
    assert event["status"] == "error" and event["polls"] == 2
    assert "c9.L1" in event["error"] and "not in the topology" in event["error"]


def test_trigger_kwargs_refuse_secrets_and_unknown_checks():
    with pytest.raises(MirrorflowError, match=r"check_kwargs.settings.sasl.password: looks like a secret"):
        PollingTrigger(check=ReplicationLagTrigger.CHECK, check_kwargs={"settings": {"sasl.password": "x"}})
    with pytest.raises(MirrorflowError, match="cannot be imported"):
        PollingTrigger(check="mirrorflow_airflow.triggers.lag.no_such_check")
    with pytest.raises(MirrorflowError, match="not JSON"):
        PollingTrigger(check=ReplicationLagTrigger.CHECK, check_kwargs={"when": object()})
