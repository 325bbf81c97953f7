"""mirror_onboard_cluster under dag.test(): a fourth cluster joins three with traffic flowing, and a clash."""

from __future__ import annotations

import json
import threading

import pytest
from confluent_kafka.admin import AdminClient

from mirrorflow.offsets.distribute import distribute
from mirrorflow.offsets.sync import publish_owned
from mirrorflow.offsets.topic import ensure_topic
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.topology.changes import apply_changes
from mirrorflow_airflow.factories.onboard import build_onboard_dag
from mirrorflow_airflow.state import (CHANGES_VARIABLE, ONBOARDING_VARIABLE, OWNERS_VARIABLE, TARGETS_VARIABLE)
from tests.dags.test_level_dags import xcom
from tests.integration.groups import consume_and_commit, read_from_committed
from tests.integration.mirroring import (Traffic, assert_exactly_once, clients, converge, partitions_of,
                                         run_level, topic_everywhere, topology, traffic)

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

THREE = """
  level: 3
  children:
    - {level: 1, children: [c1, c2]}
    - c3
"""
VARIABLES = (CHANGES_VARIABLE, ONBOARDING_VARIABLE, OWNERS_VARIABLE, TARGETS_VARIABLE)


@pytest.fixture
def operator_state(airflow_home):
    """Read the Variables the DAGs write (as JSON); every one is cleared afterwards."""
    from airflow.models import Variable

    def read(key: str, default="{}"):
        return json.loads(Variable.get(key, default_var=default))

    yield read
    for key in VARIABLES:
        Variable.delete(key)


def form(kafka_clusters, **extra):
    return {"cluster": "c4", "bootstrap": kafka_clusters["c4"].bootstrap, "conn_id": None, "sibling_of": "c3",
            "level": 1, "topics": [], "backfill": "retained", "since": None, "schemas": True, "adopt": False,
            "dry_run": False, **extra}


class LevelRuns:
    """The three clusters' level runs, round after round in a thread, as the scheduler would run them."""

    def __init__(self, topo, settings) -> None:
        self.topo, self.settings = topo, settings
        self.stop_ = threading.Event()
        self.rounds = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self.stop_.is_set():
                for level in self.topo.levels:
                    result = run_level(self.topo, level, self.settings)
                    assert result.ok, result.summary()["errors"]
                self.rounds += 1
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def __enter__(self) -> "LevelRuns":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_.set()
        self.thread.join(120)
        assert self.error is None, self.error


def test_onboarding_a_fourth_cluster_under_traffic_is_exactly_once_and_positions_its_groups(
        kafka_clusters, make_topic, operator_state):
    from airflow.models import Variable

    topic = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=2)
    topo = topology(kafka_clusters, THREE, [topic], names=("c1", "c2", "c3"))
    settings = clients(kafka_clusters, topo)
    expected = []
    for origin in ("c1", "c2", "c3"):
        expected += traffic(kafka_clusters, origin, topic, 150)
    converge(topo, settings)

    # a consumer group on c1 with a known position, distributed as mirror_offsets would
    taken = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "onboard-g", 200)
    cl = {n: ClusterClient(n, s) for n, s in settings.items()}
    for c in cl.values():
        ensure_topic(c)
    publish_owned(cl["c1"], ["onboard-g"], topo.selects)
    assert not distribute({lv: topo.links(lv) for lv in topo.levels}, cl).errors
    Variable.set(OWNERS_VARIABLE, json.dumps({"onboard-g": "c1"}))

    dag = build_onboard_dag(topo)
    assert {"cluster", "bootstrap", "conn_id", "sibling_of", "level", "topics", "backfill", "since", "schemas",
            "dry_run"} <= set(dag.params)

    dry = dag.test(run_conf=form(kafka_clusters, dry_run=True))
    assert dry.state == "success"
    plan = xcom(dry, "preflight")
    assert plan["link_id"] == "c3.L1" and plan["pins"] == {"c2.L3": "c3"} and plan["bits"] == 0b101
    assert partitions_of(kafka_clusters, "c4", topic) == 0, "a dry run creates nothing"
    assert operator_state(CHANGES_VARIABLE, "[]") == []

    with Traffic(kafka_clusters, topic, ["c1", "c2", "c3"]) as flowing, LevelRuns(topo, settings) as runs:
        flowing.wait_for(300)
        run = dag.test(run_conf=form(kafka_clusters))
        flowing.wait_for(len(flowing.ids) + 150)
    assert run.state == "success", {t: xcom(run, t) for t in ("preflight", "backfill", "verify", "summary")}
    print(f"level rounds during onboarding: {runs.rounds}; messages produced meanwhile: {len(flowing.ids)}")
    expected += flowing.ids
    backfill = xcom(run, "backfill")
    assert backfill["ok"] and backfill["copied"] >= 450
    verified = xcom(run, "verify")
    assert verified["ok"] and verified["compared"] >= 450
    assert xcom(run, "positions")["groups"] == ["onboard-g"]

    # the change is durable: the effective topology has c4 where the form said, c2.L3 pinned to c3
    changes = operator_state(CHANGES_VARIABLE, "[]")
    assert [(e["op"], e["cluster"], e["sibling_of"], e["level"]) for e in changes] == [("add", "c4", "c3", 1)]
    targets = operator_state(TARGETS_VARIABLE)
    assert targets == {"c2.L3": "c3"}
    grown = apply_changes(topo, changes)
    assert grown.levels == [1, 3] and {l.link_id for l in grown.links(1)} >= {"c3.L1", "c4.L1"}
    assert operator_state(ONBOARDING_VARIABLE) == {}, "a finished onboarding leaves no record behind"

    # from here on the regular level runs of the grown tree take over: nothing lost, nothing twice
    expected += traffic(kafka_clusters, "c4", topic, 60)
    converge(grown, clients(kafka_clusters, grown), targets=targets)
    assert_exactly_once(kafka_clusters, ["c1", "c2", "c3", "c4"], topic, expected)

    # the group positioned on c4 skips nothing it had not consumed on c1
    after = read_from_committed(kafka_clusters["c4"].bootstrap, topic, "onboard-g", 2)
    skipped = set(expected) - set(taken) - set(after)
    assert not skipped, f"{len(skipped)} messages skipped by the group on c4, e.g. {sorted(skipped)[:3]}"


def test_a_topic_clash_stops_preflight_and_nothing_is_created(kafka_clusters, make_topic, operator_state):
    topic = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=2)
    other = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=1)
    make_topic("c4", partitions=3, name=topic)  # same name, different partition count
    topo = topology(kafka_clusters, THREE, [topic, other], names=("c1", "c2", "c3"))
    dag = build_onboard_dag(topo)
    run = dag.test(run_conf=form(kafka_clusters))
    assert run.state == "failed"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["preflight"] == "failed" and states["create_topics"] == "upstream_failed", states

    from mirrorflow_airflow.factories.onboard import run_preflight

    with pytest.raises(Exception) as refused:
        run_preflight(topo, form(kafka_clusters), "t")
    message = str(refused.value)
    assert f"{topic}: 3 partitions on c4, 2 on c3" in message and "nothing was created" in message
    names = AdminClient({"bootstrap.servers": kafka_clusters["c4"].bootstrap}).list_topics(timeout=10).topics
    assert other not in names and partitions_of(kafka_clusters, "c4", topic) == 3
    assert operator_state(CHANGES_VARIABLE, "[]") == [] and operator_state(ONBOARDING_VARIABLE) == {}
