"""The scheduler runs a user's DAG on the audit's proven asset: once per window proven on c4, never for a lost one.

A user's DAG (``stack.USER_DAG_FILE``) is scheduled on ``proven("c4", topic)``
(docs/assets.md). Under ``airflow standalone`` (the package's shared one), with
the DAG and ``mirror_audit`` unpaused, the scheduler alone starts the audit, which
proves a window on every cluster, and then the user's DAG for that window; a
later window whose message c4 lost is proven on c1..c3 only, and the user's DAG
does not run for it.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.completeness.proven import window_key
from mirrorflow_dev.process import wait_until
from tests.e2e.standalone.stack import CLUSTERS, USER_DAG, unpaused
from tests.fixtures.kafka import wait_for_topic
from tests.fixtures.standalone import ApiError, Standalone
from tests.integration.kafka_io import lose, produce
from tests.integration.mirroring import clients, converge

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.timeout(1200)]

RUN_TIMEOUT = 300.0  # queueing, a LocalExecutor worker, the audit's tasks: generous on a busy two-core machine


def test_the_scheduler_runs_a_users_dag_once_per_window_the_audit_proves_on_c4_never_for_a_lost_one(
        standalone_launched, kafka_clusters, stack, airflow_standalone: Standalone):
    """Unpaused, the scheduler starts ``mirror_audit``, which proves window ``W1`` of the topic on every cluster,
    then the user's DAG for ``W1``. A message of a later window ``W2`` reaches every cluster, and c4 loses it
    before the next audit reads it: that audit fails naming it, proves ``W2`` on c1..c3 only, and the user's
    DAG does not run for ``W2``."""
    topic, topology = stack.topics.assets, stack.topology
    for name in CLUSTERS:
        admin = AdminClient({"bootstrap.servers": kafka_clusters[name].bootstrap})  # kept while its futures run
        admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=30)[topic].result(timeout=60)
        wait_for_topic(admin, topic, 2)
    hour_ago = int(time.time() * 1000) - 3_600_000
    w1 = hour_ago - hour_ago % 600_000
    w2 = w1 + 1_200_000  # final too: twenty minutes later, forty minutes ago
    for i, name in enumerate(CLUSTERS):  # W1 on partition 0 of every cluster
        produce(kafka_clusters[name].bootstrap, topic,
                [(f"{name}-k".encode(), f"{name}|w1|{n}".encode(), None, w1 + 1000 * i + n) for n in range(5)],
                partition=0)
    converge(topology, clients(kafka_clusters, topology))

    def listed() -> bool:
        try:
            return airflow_standalone.api("GET", f"/dags/{USER_DAG}")["dag_id"] == USER_DAG
        except Exception:  # noqa: BLE001 - not parsed yet
            return False
    wait_until(f"{USER_DAG} to be listed", listed, 300, 3, airflow_standalone.import_errors)
    before = _audit_runs(airflow_standalone)
    # from here on, the scheduler starts the runs (paused again when the test ends, pass or fail)
    with unpaused(airflow_standalone, (USER_DAG, "mirror_audit")):
        first = _audit_run(airflow_standalone, before)
        assert first["state"] == "success", airflow_standalone.task_logs("mirror_audit", first["dag_run_id"])
        wait_until(f"{USER_DAG} to run for W1",
                   lambda: _user_runs(airflow_standalone) == [(window_key(w1), "success")], RUN_TIMEOUT, 2,
                   lambda: airflow_standalone.task_logs(USER_DAG) + airflow_standalone.logged_errors())

        produce(kafka_clusters["c1"].bootstrap, topic, [(b"c1-late", b"c1|w2", None, w2 + 5)], partition=1)
        converge(topology, clients(kafka_clusters, topology))
        lose(kafka_clusters["c4"].bootstrap, topic, 2, b"c1|w2")
        second = _audit_run(airflow_standalone, _audit_runs(airflow_standalone), trigger=True)
        assert second["state"] == "failed", "the audit did not find c4's loss"  # it names the lost message
        events = airflow_standalone.api("GET", "/assets/events?limit=200")["asset_events"]
        proven = {(e["uri"], e.get("partition_key")) for e in events if e["uri"].endswith(f"/{topic}")}
        assert proven == {(f"mirrorflow-proven://{c}/{topic}", window_key(w)) for c in CLUSTERS for w in (w1, w2)
                          if (c, w) != ("c4", w2)}, proven
        # the W2 events of c1..c3 came with the failed audit's success of their tasks; none for c4
        assert _user_runs(airflow_standalone) == [(window_key(w1), "success")]


def _audit_runs(standalone: Standalone) -> set[str]:
    return {r["dag_run_id"] for r in standalone.dag_runs("mirror_audit")}


def _audit_run(standalone: Standalone, before: set[str], trigger: bool = False) -> dict:
    """The next ``mirror_audit`` run not in ``before`` (one triggered through the REST API if ``trigger``), once
    ended: the one the scheduler starts (``before`` is read before the DAG is unpaused, so that run is not in it)."""
    before = set(before)
    if trigger:
        before.discard(standalone.api("POST", "/dags/mirror_audit/dagRuns", {"logical_date": None})["dag_run_id"])
    found: dict = {}

    def ended() -> bool:
        try:
            runs = [r for r in standalone.dag_runs("mirror_audit") if r["dag_run_id"] not in before]
        except ApiError:  # a stalled API server: ask again, the deadline decides
            return False
        found.update(next((r for r in runs if r["state"] in ("success", "failed")), {}))
        return bool(found)
    wait_until("an audit run to end", ended, RUN_TIMEOUT, 2,
               lambda: standalone.task_logs("mirror_audit") + standalone.logged_errors())
    return found


def _user_runs(standalone: Standalone) -> list[tuple[str | None, str]] | None:
    """The user's DAG runs (partition key, state); ``None`` while the API server does not answer."""
    try:
        return sorted((r.get("partition_key"), r["state"]) for r in standalone.dag_runs(USER_DAG))
    except ApiError:
        return None
