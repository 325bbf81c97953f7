"""``on_data`` levels under the real scheduler and triggerer: data starts the runs, nothing else does.

``airflow standalone`` (scheduler, triggerer, dag-processor, LocalExecutor; the
package's shared one, ``stack.py``) parses this repo's DAG files on a four-cluster
topology whose levels are ``on_data``, with ``spark_default`` on the session's
Spark Connect server (a warm Spark, as the demo has). Only the two level DAGs are
unpaused; the test triggers nothing. Messages produced on every cluster reach
every cluster exactly once; every level run was started by the watcher's asset
event; no two copies of a level overlapped; once the tree has converged the
watcher goes quiet (no run starts for copies already skipped, nor for
transaction markers).
"""

from __future__ import annotations

import pytest

from mirrorflow_dev.process import WaitTimeout, wait_until
from tests.e2e.standalone.stack import CLUSTERS, LEVEL_DAGS, unpaused
from tests.fixtures.standalone import ApiError
from tests.integration.kafka_io import read_all
from tests.integration.mirroring import assert_exactly_once, traffic

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.timeout(900)]

PER_CLUSTER = 30  # messages produced on each cluster, in three bursts
CONVERGE_TIMEOUT = 300.0


def _runs(airflow, dag_id: str) -> list[dict]:
    try:
        return airflow.api("GET", f"/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]
    except ApiError:  # the API server stalls under load now and then: ask again, the deadline decides
        return []


def _counts(kafka_clusters, topic: str) -> dict[str, int]:
    return {c: len(read_all(kafka_clusters[c].bootstrap, topic, 2)) for c in CLUSTERS}


def test_on_data_levels_started_by_the_watcher_alone_bring_every_message_everywhere_once_then_go_quiet(
        standalone_launched, kafka_clusters, make_topic, stack):
    data_topic = stack.topics.data
    for cluster in CLUSTERS:
        make_topic(cluster, partitions=2, name=data_topic)
    airflow = standalone_launched.wait_ready(LEVEL_DAGS)
    # Only this test unpauses the level DAGs (the package's others converge in process): every level run is its own.
    with unpaused(airflow, LEVEL_DAGS):  # paused again when the test ends, pass or fail
        expected: list[str] = []
        for burst in range(3):
            for cluster in CLUSTERS:
                expected += traffic(kafka_clusters, cluster, data_topic, PER_CLUSTER // 3, start=burst * 100)
            if burst < 2:  # the next burst once the watcher has started a run for this one
                wait_until("a level run started by data", lambda: any(_runs(airflow, d) for d in LEVEL_DAGS), 120, 1,
                           airflow.log_tail)
        total = len(expected)
        wait_until(f"{total} messages on every cluster",
                   lambda: all(n >= total for n in _counts(kafka_clusters, data_topic).values()),
                   CONVERGE_TIMEOUT, 2, lambda: f"{_counts(kafka_clusters, data_topic)}\n{airflow.log_tail(60)}")
        assert_exactly_once(kafka_clusters, CLUSTERS, data_topic, expected)

        def settled() -> dict[str, list[dict]] | None:
            runs = {d: _runs(airflow, d) for d in LEVEL_DAGS}
            done = all(r["state"] in ("success", "failed") for rs in runs.values() for r in rs)
            return runs if done and all(runs.values()) else None
        runs = wait_until("the level runs to finish", settled, 180, 2, airflow.log_tail)
        for dag_id, dag_runs in runs.items():
            assert {r["run_type"] for r in dag_runs} == {"asset_triggered"}, (dag_id, dag_runs)
            assert all(r["state"] == "success" for r in dag_runs), (dag_id, dag_runs)
            # one copy at a time per level, though a second run may wait for it (docs/levels.md)
            copies = sorted((ti["start_date"], ti["end_date"]) for ti in airflow.api(
                "GET", f"/dags/{dag_id}/dagRuns/~/taskInstances?task_id=copy&limit=100")["task_instances"])
            assert len(copies) == len(dag_runs)
            assert all(end <= later for (_, end), (later, _) in zip(copies, copies[1:])), (dag_id, copies)
        started = sum(len(r) for r in runs.values())

        # converged: the watcher sees nothing waiting (the copies were skipped, markers and all) and starts nothing
        with pytest.raises(WaitTimeout):
            wait_until("a level run after convergence",
                       lambda: sum(len(_runs(airflow, d)) for d in LEVEL_DAGS) > started, 15, 1)
        print(f"\n[on_data] {started} level runs ({', '.join(f'{d}: {len(r)}' for d, r in runs.items())}) "
              f"for {total} messages; converged")
