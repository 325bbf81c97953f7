"""mirror_switch_target under dag.test(): the form's params, the exact cut, the durable effective target."""

from __future__ import annotations

import json

import pytest

from mirrorflow.topology import Topology
from mirrorflow_airflow.factories.switch import build_switch_dag
from mirrorflow_airflow.state import TARGETS_VARIABLE
from tests.dags.dag_runs import xcom
from tests.integration.mirroring import (
    FOUR,
    assert_exactly_once,
    clients,
    converge,
    run_level,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


@pytest.fixture
def stored_targets(airflow_home):
    """Read the effective targets the DAG stored; cleared afterwards (link ids repeat across tests)."""
    from airflow.models import Variable

    def read() -> dict:
        return json.loads(Variable.get(TARGETS_VARIABLE, default_var="{}"))

    yield read
    Variable.delete(TARGETS_VARIABLE)


def test_switch_dag_moves_the_link_and_the_level_runs_follow(kafka_clusters, make_topic, stored_targets):
    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, topo)
    expected = traffic(kafka_clusters, "c1", topic, 40)
    assert run_level(topo, 3, settings).ok  # c1 -> c3, its default target

    dag = build_switch_dag(topo)
    assert {"source_cluster", "level", "target", "dry_run", "force"} <= set(dag.params)
    assert dag.params.get_param("target").schema["enum"] == ["c1", "c2", "c3", "c4"]

    dry = dag.test(run_conf={"source_cluster": "c1", "level": 3, "target": "c4", "dry_run": True})
    assert dry.state == "success"
    dry_cuts = xcom(dry, "switch")["cuts"]
    assert set(dry_cuts) == {topic} and sum(dry_cuts[topic].values()) == 40
    assert stored_targets() == {}  # a dry run changes nothing

    # with approvals on, the plan is proposed first; a dry run asks nobody, goes through, and changes nothing
    approving = build_switch_dag(Topology.parse({**topo.to_dict(), "approvals": {"enabled": True}}))
    dry = approving.test(run_conf={"source_cluster": "c1", "level": 3, "target": "c4", "dry_run": True})
    assert dry.state == "success"
    proposed = xcom(dry, "propose")
    assert proposed["subject"] == "Switch c1.L3 from c3 to c4?" and f"| {topic} | 0 |" in proposed["text"]
    assert xcom(dry, "approve")["dry_run"] is True and xcom(dry, "switch")["cuts"] == dry_cuts
    assert stored_targets() == {}

    # dag.test() merges run_conf into the DAG object's params in place, so a key set by the
    # dry run above would stick: say dry_run explicitly.
    run = dag.test(run_conf={"source_cluster": "c1", "level": 3, "target": "c4", "dry_run": False})
    assert run.state == "success"
    report = xcom(run, "switch")
    assert report["mode"] == "checkpoint" and report["old_target"] == "c3" and report["new_target"] == "c4"
    assert report["cuts"] == dry_cuts  # the dry run showed exactly the cut that was made
    assert stored_targets() == {"c1.L3": "c4"}

    expected += traffic(kafka_clusters, "c1", topic, 40, start=40)
    converge(topo, settings, targets=stored_targets())
    assert_exactly_once(kafka_clusters, topo.leaves, topic, expected)


def test_switch_dag_refuses_a_target_outside_the_subtree(kafka_clusters, make_topic, stored_targets):
    topic = make_topic("c1")
    dag = build_switch_dag(topology(kafka_clusters, FOUR, [topic]))
    for t in dag.tasks:
        t.retries = 0
    run = dag.test(run_conf={"source_cluster": "c1", "level": 3, "target": "c2"})
    assert run.state == "failed"
    assert stored_targets() == {}
