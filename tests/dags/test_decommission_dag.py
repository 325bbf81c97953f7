"""mirror_decommission_cluster under dag.test(): a leaf that is a link's target leaves, nothing is lost."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer

from mirrorflow.topology.changes import apply_changes
from mirrorflow_airflow.factories.decommission import build_decommission_dag
from mirrorflow_airflow.state import CHANGES_VARIABLE, TARGETS_VARIABLE
from mirrorflow_airflow.steps.decommission import run_preflight
from tests.dags.dag_runs import xcom
from tests.integration.mirroring import (
    FOUR,
    Traffic,
    assert_exactly_once,
    clients,
    converge,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


def _member_of(bootstrap: str, topic: str, group: str) -> Consumer:
    """A consumer that stays an active member of ``group`` until closed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        assert time.monotonic() < deadline, f"{group} got no assignment on {bootstrap}"
        consumer.poll(0.2)
    return consumer


@pytest.mark.usefixtures("spark_default_connect")  # the drain on the warm Connect server: not about spark-submit
def test_decommissioning_a_target_leaf_moves_its_links_and_loses_nothing(kafka_clusters, make_topic,
                                                                          operator_state):
    topic = topic_everywhere(make_topic)
    base = topology(kafka_clusters, FOUR, [topic])
    settings = clients(kafka_clusters, base)
    expected = []
    for origin in ("c1", "c2", "c3", "c4"):
        expected += traffic(kafka_clusters, origin, topic, 100)
    converge(base, settings)
    dag = build_decommission_dag(base)
    assert {"cluster", "force", "dry_run"} <= set(dag.params)

    # a consumer group still active on c4 stops the preflight, naming it
    member = _member_of(kafka_clusters["c4"].bootstrap, topic, "decom-active")
    try:
        with pytest.raises(Exception, match="decom-active"):
            run_preflight(base, "c4", force=False, dry_run=True)
    finally:
        member.close()

    def current():
        return apply_changes(base, operator_state(CHANGES_VARIABLE, "[]")), operator_state(TARGETS_VARIABLE)

    # c4 still holds messages it has not passed on when it is taken out: the drain must carry them;
    # c1..c3 keep producing meanwhile, and what c2 writes must reach c3 instead of c4 from the switch on
    expected += traffic(kafka_clusters, "c4", topic, 50, start=1000)
    with Traffic(kafka_clusters, topic, ["c1", "c2", "c3"], batch=5, interval=0.2) as flowing:
        flowing.wait_for(60)
        run = dag.test(run_conf={"cluster": "c4", "force": False, "dry_run": False})
        flowing.wait_for(len(flowing.ids) + 60)
    assert run.state == "success", {t: xcom(run, t) for t in ("preflight", "switch", "drain", "leave")}
    plan = xcom(run, "preflight")
    assert [(m["link_id"], m["old_target"], m["new_target"]) for m in plan["moves"]] == [("c2.L3", "c4", "c3")]
    assert xcom(run, "switch")["c2.L3"]["mode"] == "checkpoint"
    drained = xcom(run, "drain")["copied"]
    assert sum(drained.values()) >= 50, drained  # c4's own 50, to c3 (level 1) and to c2 (level 3)

    changes = operator_state(CHANGES_VARIABLE, "[]")
    assert [(e["op"], e["cluster"]) for e in changes] == [("remove", "c4")]
    after, targets = current()
    assert sorted(after.clusters) == ["c1", "c2", "c3"] and targets == {}
    assert after.link("c2.L3").default_target == "c3"

    expected += flowing.ids
    converge(after, settings, targets=targets)
    assert_exactly_once(kafka_clusters, ["c1", "c2", "c3"], topic, expected)
