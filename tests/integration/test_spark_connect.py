"""The jobs on a real Spark Connect server: the same copies, no Spark start per run, interrupted safely."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from mirrorflow.copy.job import run_job
from mirrorflow.copy.spec import build_spec
from mirrorflow.progress import Progress
from mirrorflow.spark import opening, parallelism, redact, run_bins, session, session_id, with_session
from mirrorflow.topology.routes import effective_links
from tests.integration.mirroring import (
    FOUR,
    assert_exactly_once,
    checkpointed,
    clients,
    converge,
    topic_everywhere,
    topology,
    traffic,
)
from tests.integration.progress_lines import every_update, progress_lines, spark_reported

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

_pause = threading.Event()  # never set: .wait(t) paces polling


def test_four_cluster_tree_converges_exactly_once_on_spark_connect(kafka_clusters, make_topic, spark_connect_server,
                                                                   caplog, monkeypatch):
    topic = topic_everywhere(make_topic, partitions=3)
    topo = topology(kafka_clusters, FOUR, [topic])
    expected = []
    for c in ("c1", "c2", "c3", "c4"):
        expected += traffic(kafka_clusters, c, topic, 40)
    every_update(monkeypatch, caplog)
    # as the level operator runs it: the session opening while the run plans (mirrorflow.spark.opening)
    with opening(spark_connect_server.url) as spark_connect:
        results = converge(topo, clients(kafka_clusters, topo), spark_connect)
        assert parallelism(spark_connect.result()) == 2  # the server's spark.default.parallelism
    assert_exactly_once(kafka_clusters, topo.leaves, topic, expected)
    assert sum(r.copied for r in results) == 4 * 40 * 3
    assert all(r.ok for r in results)
    assert max(r.tasks for r in results) == 2  # the work went out as Spark tasks on the server
    # progress: finished Spark tasks while it runs (see the test below); records and bytes at the end
    final = progress_lines(caplog, "level", results[0].run_id)[-1]
    assert final["final"] and final["measured"] == "spark_tasks"
    assert final["tasks_done"] == final["tasks"] == results[0].tasks > 0
    assert final["records"] == final["planned"] > 0


@pytest.mark.parametrize("engine", ["spark", "spark_connect"])  # a SparkContext, or a Spark Connect server
def test_progress_counts_the_finished_spark_tasks_while_the_job_runs(engine, request, tmp_path, caplog):
    """The driver hears of a task only when it ends; what Spark itself reports of the running job reaches the
    progress lines: a SparkContext's status tracker (polled by the ticker), a Connect server's progress reports.

    Each task waits until the driver's progress has seen the job running with none of its tasks done, so the
    check needs no timing: a Spark that reported nothing would leave the tasks waiting, and the test failing.
    """
    spark = request.getfixturevalue(engine)
    seen = tmp_path / "seen-running"

    class Watched(Progress):
        def tasks(self, done: int, total: int) -> None:
            super().tasks(done, total)
            if 0 == done < total:
                seen.touch()

    def wait_until_seen(bins):  # runs in a Spark task (a Python worker of this machine)
        import os
        import threading
        import time

        for path in bins:
            deadline = time.monotonic() + 60
            while not os.path.exists(path) and time.monotonic() < deadline:
                threading.Event().wait(0.02)  # paces the polling of the driver's mark
            yield {"seen": os.path.exists(path)}

    caplog.set_level(logging.INFO, logger="mirrorflow.audit")
    if engine == "spark_connect":  # the server's reports, every 2 s by default, at this session's pace
        spark.conf.set("spark.connect.progress.reportInterval", "100ms")
    try:
        results = run_bins(spark, wait_until_seen, [str(seen)] * 2, "progress test", Watched("progress test", 2,
                                                                                              interval=0))
    finally:
        if engine == "spark_connect":
            spark.conf.unset("spark.connect.progress.reportInterval")
    assert results == [{"seen": True}] * 2
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mirrorflow.audit"]
    assert spark_reported([line for line in lines if line["event"] == "progress"], 2), lines


def test_a_later_client_reuses_the_session_and_its_warm_workers(spark_connect_server):
    """Every run is a new client (an Airflow task); the stable session id keeps the server's Python workers."""
    import pyarrow as pa

    def pids(batches):
        import os

        for batch in batches:
            yield pa.RecordBatch.from_pydict({"pid": [os.getpid()] * batch.num_rows})

    seen = []
    for _ in range(2):
        with session(spark_connect_server.url) as spark:
            seen.append((spark.session_id, {r.pid for r in spark.range(0, 2, 1, 2).mapInArrow(pids, "pid long").collect()}))
    (first_id, first_pids), (second_id, second_pids) = seen
    assert first_id == second_id == session_id(spark_connect_server.url)
    assert first_pids & second_pids, f"no Python worker was reused: {first_pids} then {second_pids}"


def test_a_session_the_server_closed_is_replaced_by_a_fresh_one(spark_connect_server, caplog):
    from pyspark.sql.connect.session import SparkSession

    name = f"closed-{time.monotonic_ns()}"
    sid = session_id(spark_connect_server.url, name)
    closing = SparkSession.builder.remote(with_session(spark_connect_server.url, sid)).create()
    closing.range(1).collect()
    closing.stop()  # releases the session: the server refuses its id from now on
    with caplog.at_level(logging.WARNING, logger="mirrorflow.spark.connect"):
        with session(spark_connect_server.url, name) as spark:
            assert spark.range(3).count() == 3
            assert spark.session_id != sid
    assert f"refuses mirrorflow's session {sid}" in caplog.text


def test_a_connect_session_leaves_the_process_free_to_start_a_classic_spark(spark_connect_server):
    """An Airflow worker runs Connect tasks and spark-submit tasks alike: the first must not poison the second."""
    import os

    with session(spark_connect_server.url) as spark:
        assert spark.range(2).count() == 2
    assert "SPARK_CONNECT_MODE_ENABLED" not in os.environ and "SPARK_REMOTE" not in os.environ


def test_an_unreachable_server_is_named_at_once():
    from mirrorflow.errors import MirrorflowError
    from mirrorflow_dev.process import free_port

    port = free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(MirrorflowError, match=rf"Spark Connect server sc://127.0.0.1:{port}/;token=\*\*\* does not answer"):
        with session(f"sc://127.0.0.1:{port}/;token=secret-token"):
            pass
    assert time.monotonic() - started < 10  # not the client's minutes of retries


def test_a_run_planned_while_an_unreachable_server_opens_names_the_server_and_copies_nothing(kafka_clusters,
                                                                                               make_topic):
    from mirrorflow.errors import MirrorflowError
    from mirrorflow_dev.process import free_port

    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic])
    traffic(kafka_clusters, "c1", topic, 5)
    url = f"sc://127.0.0.1:{free_port()}"  # nothing listens there
    links = effective_links(topo, 1)
    spec = build_spec(topo, 1, "unreachable", links, clients(kafka_clusters, topo))
    with pytest.raises(MirrorflowError, match=rf"Spark Connect server {url} does not answer"):
        with opening(url) as spark:
            run_job(spec, spark)
    assert checkpointed(kafka_clusters["c2"].bootstrap, "c1.L1", topic, 1, wait=10) == 0  # nothing committed


def test_redact_hides_the_token_only():
    url = "sc://spark.example:15002/;user_id=mirror;token=abc123;use_ssl=true"
    assert redact(url) == "sc://spark.example:15002/;user_id=mirror;token=***;use_ssl=true"
    assert "abc123" not in with_session(redact(url), "x")
    assert with_session(url, "s1").endswith(";use_ssl=true;session_id=s1")
    assert session_id(url) == session_id("sc://spark.example:15002/;token=other")  # credentials do not count
    with pytest.raises(ValueError, match="sc://"):
        session_id("http://spark.example:15002")


def test_a_job_interrupted_mid_batch_then_rerun_is_exactly_once(kafka_clusters, make_topic, spark_connect_server):
    """What the operator's on_kill does: interrupt the job's tag on the server; the next run finishes it exactly."""
    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic], extra="""
replication:
  links: {c1.L1: {max_bytes_per_second: 20000, txn_records: 200}}
""")
    expected = traffic(kafka_clusters, "c1", topic, 8000)  # ~20 bytes each: about 8 s of copying
    links = [l for l in effective_links(topo, 1) if l.link_id == "c1.L1"]
    settings = clients(kafka_clusters, topo)
    outcome: dict = {}

    def job() -> None:
        try:
            with session(spark_connect_server.url) as spark:
                spark.addTag("mirrorflow-test-interrupt")  # tags belong to the thread that runs the job
                outcome["result"] = run_job(build_spec(topo, 1, "interrupted", links, settings), spark)
        except Exception as exc:  # noqa: BLE001 - the interruption is what this test expects
            outcome["error"] = exc

    runner = threading.Thread(target=job)
    runner.start()
    c2 = kafka_clusters["c2"].bootstrap
    deadline = time.monotonic() + 180
    while checkpointed(c2, "c1.L1", topic, 2, stable=False) < 400:  # a few transactions committed on the target
        assert runner.is_alive(), f"the job ended before it could be interrupted: {outcome}"
        assert time.monotonic() < deadline, "the job never committed a transaction"
        _pause.wait(0.1)
    with session(spark_connect_server.url) as other:  # another client of the same session, as on_kill is
        other.interruptTag("mirrorflow-test-interrupt")
    runner.join(120)
    assert not runner.is_alive()
    assert "error" in outcome, f"the job was not interrupted: {outcome}"
    done = checkpointed(c2, "c1.L1", topic, 2, wait=30, stable=False)  # the killed transaction is open
    assert 400 <= done < 8000, f"the interruption did not land mid-batch (checkpoint {done})"

    with session(spark_connect_server.url) as spark:
        converge(topo, settings, spark)
    assert_exactly_once(kafka_clusters, topo.leaves, topic, expected)
