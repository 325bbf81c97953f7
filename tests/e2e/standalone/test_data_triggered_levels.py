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

A second tree runs beside it in the same Airflow (``stack.py``): namespace ``b``, on
c3 and c4 again, its topic stored there as ``b-<name>``. Its level DAG,
``b.mirror_level_1``, is unpaused with the first tree's: both converge exactly,
neither copies the other's topic nor reads or writes the other's checkpoints, and
the Mirror page's API shows each tree apart.
"""

from __future__ import annotations

import pytest

from mirrorflow.internal_names import checkpoint_group, in_namespace
from mirrorflow_dev.process import WaitTimeout, wait_until
from tests.e2e.standalone.stack import (
    CLUSTERS,
    LEVEL_DAGS,
    SECOND_CLUSTERS,
    SECOND_LEVEL_DAG,
    SECOND_NAMESPACE,
    SECOND_PREFIX,
    unpaused,
)
from tests.fixtures.standalone import ApiError
from tests.integration.groups import committed_offsets
from tests.integration.kafka_io import read_all
from tests.integration.mirroring import assert_exactly_once, partitions_of, traffic

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.timeout(900)]

PER_CLUSTER = 30  # messages produced on each cluster, in bursts
BURSTS = 2  # the second once the watcher has started a run for the first
#: How long the converged tree must stay without a run: several of the watcher's floors (3 s) and polls (1 s).
QUIET_S = 10
CONVERGE_TIMEOUT = 300.0


def _runs(airflow, dag_id: str) -> list[dict]:
    try:
        return airflow.api("GET", f"/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]
    except ApiError:  # the API server stalls under load now and then: ask again, the deadline decides
        return []


def _counts(kafka_clusters, topic: str, clusters=CLUSTERS) -> dict[str, int]:
    return {c: len(read_all(kafka_clusters[c].bootstrap, topic, 2)) for c in clusters}


def test_on_data_levels_started_by_the_watcher_alone_bring_every_message_everywhere_once_then_go_quiet(
        standalone_launched, kafka_clusters, make_topic, stack):
    data_topic, second = stack.topics.data, SECOND_PREFIX + stack.topics.second
    for cluster in CLUSTERS:
        make_topic(cluster, partitions=2, name=data_topic)
    for cluster in SECOND_CLUSTERS:
        make_topic(cluster, partitions=2, name=second)
    level_dags = (*LEVEL_DAGS, SECOND_LEVEL_DAG)
    airflow = standalone_launched.wait_ready(level_dags)
    # Only this test unpauses the level DAGs (the package's others converge in process): every level run is its own.
    with unpaused(airflow, level_dags):  # paused again when the test ends, pass or fail
        expected: list[str] = []
        expected_second: list[str] = []
        for burst in range(BURSTS):
            for cluster in CLUSTERS:
                expected += traffic(kafka_clusters, cluster, data_topic, PER_CLUSTER // BURSTS, start=burst * 100)
            for cluster in SECOND_CLUSTERS:
                expected_second += traffic(kafka_clusters, cluster, second, PER_CLUSTER // BURSTS, start=burst * 100)
            if burst < BURSTS - 1:  # the next burst once the watcher has started a run for this one
                wait_until("a level run started by data", lambda: any(_runs(airflow, d) for d in level_dags), 120, 1,
                           airflow.log_tail)
        total, total_second = len(expected), len(expected_second)
        wait_until(f"{total} messages on every cluster, {total_second} of the second tree on its clusters",
                   lambda: all(n >= total for n in _counts(kafka_clusters, data_topic).values()) and all(
                       n >= total_second for n in _counts(kafka_clusters, second, SECOND_CLUSTERS).values()),
                   CONVERGE_TIMEOUT, 2, lambda: f"{_counts(kafka_clusters, data_topic)} "
                   f"{_counts(kafka_clusters, second, SECOND_CLUSTERS)}\n{airflow.log_tail(60)}")
        assert_exactly_once(kafka_clusters, CLUSTERS, data_topic, expected)
        assert_exactly_once(kafka_clusters, SECOND_CLUSTERS, second, expected_second)
        _neither_touched_the_other(kafka_clusters, data_topic, stack.topics.second)
        _the_mirror_page_shows_each_tree(airflow)

        def settled() -> dict[str, list[dict]] | None:
            runs = {d: _runs(airflow, d) for d in level_dags}
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
                       lambda: sum(len(_runs(airflow, d)) for d in level_dags) > started, QUIET_S, 1)
        print(f"\n[on_data] {started} level runs ({', '.join(f'{d}: {len(r)}' for d, r in runs.items())}) "
              f"for {total} messages; converged")


def _neither_touched_the_other(kafka_clusters, first_topic: str, second_logical: str) -> None:
    """No topic of one tree under the other's names, and each tree's checkpoints under its own groups only."""
    second = SECOND_PREFIX + second_logical
    for cluster in CLUSTERS:
        assert partitions_of(kafka_clusters, cluster, second_logical) == 0, (cluster, second_logical)
        if cluster not in SECOND_CLUSTERS:
            assert partitions_of(kafka_clusters, cluster, second) == 0, (cluster, second)
    for cluster in SECOND_CLUSTERS:
        assert partitions_of(kafka_clusters, cluster, SECOND_PREFIX + first_topic) == 0, cluster
    # c3 -> c4 is link c3.L1 in both trees: one group each on c4, each holding its own tree's topic alone
    c4, link = kafka_clusters["c4"].bootstrap, "c3.L1"
    first_group, second_group = checkpoint_group(link), in_namespace(checkpoint_group(link), SECOND_NAMESPACE)
    assert second_group == "_mirrorflow.b.link.c3.L1"
    assert all(o >= 0 for o in committed_offsets(c4, second, second_group, 2)), "the second tree's checkpoints"
    assert all(o >= 0 for o in committed_offsets(c4, first_topic, first_group, 2)), "the first tree's checkpoints"
    assert all(o < 0 for o in committed_offsets(c4, second, first_group, 2)), "the first tree read the second's"
    assert all(o < 0 for o in committed_offsets(c4, first_topic, second_group, 2)), "the second tree read the first's"


def _the_mirror_page_shows_each_tree(airflow) -> None:
    """``/mirror/api/trees`` lists both; each tree's status names its own level DAGs and links."""
    trees = airflow.get_json("/mirror/api/trees")["trees"]
    assert [(t["tree"], t["name"]) for t in trees] == [("", "e2e-standalone"), (SECOND_NAMESPACE, "second-tree")]
    first = airflow.get_json("/mirror/api/status")
    second = airflow.get_json(f"/mirror/api/status?tree={SECOND_NAMESPACE}")
    assert [lv["dag_id"] for lv in first["levels"]] == list(LEVEL_DAGS)
    assert [lv["dag_id"] for lv in second["levels"]] == [SECOND_LEVEL_DAG] and second["levels"][0]["runs"]
    assert {r["id"] for r in second["links"]["all_edges"]} == {"c3.L1", "c4.L1"}
    assert second["namespace"] == SECOND_NAMESPACE and first["namespace"] == ""
