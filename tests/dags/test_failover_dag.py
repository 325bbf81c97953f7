"""mirror_failover_consumer_group and mirror_offsets under dag.test(), with real groups on real clusters.

Counts are asserted: what the group reads on the new cluster after the DAG,
against what it consumed on the old one.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from mirrorflow.topology import Topology
from mirrorflow_airflow.factories.failover import build_failover_dag
from mirrorflow_airflow.factories.lag_monitor import build_lag_monitor_dag
from mirrorflow_airflow.factories.offsets import build_offsets_dag
from mirrorflow_airflow.state import LAG_SNAPSHOT_VARIABLE, OWNERS_VARIABLE
from tests.dags.dag_runs import xcom
from tests.dags.forms import failover_conf
from tests.integration.groups import Member, committed_offsets, consume_and_commit, read_from_committed
from tests.integration.mirroring import (
    FOUR,
    Traffic,
    clients,
    converge,
    run_level,
    topic_everywhere,
    topology,
    traffic,
)

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


@pytest.fixture
def lag_snapshot(airflow_home):
    """The lag monitor's snapshot Variable, removed afterwards (a later monitor would read it as its previous)."""
    from airflow.models import Variable

    yield lambda: json.loads(Variable.get(LAG_SNAPSHOT_VARIABLE, default_var="{}"))
    Variable.delete(LAG_SNAPSHOT_VARIABLE)


def test_planned_exact_failover_two_hops_and_back_skips_nothing_and_replays_nothing(kafka_clusters, make_topic, as_current,
                                                                          owners):
    """c4 names topics and groups of its own: the group resumes there under its name, on the topic's name there."""
    topic = topic_everywhere(make_topic, names=("c1", "c2", "c3"))
    on_c4, group_on_c4 = f"acme.main.prod.{topic}", "acme-prod-fo-planned"
    make_topic("c4", partitions=2, name=on_c4)
    data = topology(kafka_clusters, FOUR, [topic]).to_dict()
    data["clusters"]["c4"]["names"] = {"topics": "{tenant}.{instance}.{environment}.{topic}",
                                       "groups": "{tenant}-{environment}-{group}",
                                       "values": {"tenant": "acme", "instance": "main", "environment": "prod"}}
    topo = as_current(Topology.parse(data))
    settings = clients(kafka_clusters, topo)
    expected = traffic(kafka_clusters, "c1", topic, 300)
    converge(topo, settings)
    expected += traffic(kafka_clusters, "c1", topic, 100, start=300)  # not on c4 yet
    done = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "fo-planned", 350)
    dag = build_failover_dag(topo)

    dry = dag.test(run_conf=failover_conf(groups=["fo-planned"], dry_run=True))
    assert dry.state == "success"
    assert committed_offsets(kafka_clusters["c4"].bootstrap, on_c4, group_on_c4, 2) == [-1001, -1001]
    assert xcom(dry, "switch")["dry_run"] is True

    # the wait must hold the switch until c4 holds what the group consumed: mirror meanwhile
    mirrored = threading.Thread(target=converge, args=(topo, settings))
    mirrored.start()
    run = dag.test(run_conf=failover_conf(groups=["fo-planned"], dry_run=False))
    mirrored.join(300)
    assert run.state == "success"
    rows = xcom(run, "switch")["plan"]["rows"]
    assert [r["expected_replay"] for r in rows] == [0, 0]
    assert xcom(run, "verify")["verified"] is True

    rest = read_from_committed(kafka_clusters["c4"].bootstrap, on_c4, group_on_c4, 2)
    assert Counter(done) + Counter(rest) == Counter(expected), "skipped or replayed on c4"
    assert owners()["fo-planned"] == "c4"

    # failback: the same DAG the other way round, after the group consumed a little more on c4
    done += consume_and_commit(kafka_clusters["c4"].bootstrap, on_c4, group_on_c4, 20)
    back = dag.test(run_conf=failover_conf(groups=["fo-planned"], from_cluster="c4", to_cluster="c1"))
    assert back.state == "success"
    rest = read_from_committed(kafka_clusters["c1"].bootstrap, topic, "fo-planned", 2)
    assert Counter(done) + Counter(rest) == Counter(expected), "skipped or replayed on c1 after the failback"
    assert owners()["fo-planned"] == "c1"


def test_refuses_a_group_with_members_on_the_source_or_the_target(kafka_clusters, make_topic, as_current, owners):
    topic = topic_everywhere(make_topic)
    topo = as_current(topology(kafka_clusters, FOUR, [topic]))
    traffic(kafka_clusters, "c1", topic, 50)
    converge(topo, clients(kafka_clusters, topo))
    consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "fo-busy", 20)
    dag = build_failover_dag(topo)

    for where in ("c1", "c4"):
        member = Member(kafka_clusters[where].bootstrap, topic, "fo-busy")
        try:
            member.wait_joined(where)
            run = dag.test(run_conf=failover_conf(groups=["fo-busy"]))
        finally:
            member.stop()
        assert run.state == "failed", f"a member on {where} must stop the failover"
        assert committed_offsets(kafka_clusters["c4"].bootstrap, topic, "fo-busy", 2) == [-1001, -1001]
        assert "fo-busy" not in owners()


def test_active_active_exact_failover_skips_nothing_and_replays_what_the_lag_monitor_promised(
        kafka_clusters, make_topic, as_current, owners, lag_snapshot):
    topic = topic_everywhere(make_topic)
    topo = as_current(topology(kafka_clusters, FOUR, [topic], extra="offsets: {groups: [fo-aa]}\n"))
    settings = clients(kafka_clusters, topo)
    with Traffic(kafka_clusters, topic, ["c1", "c3"]) as flowing:  # written on c1 and c3 at once
        flowing.wait_for(200)
        for level in topo.levels:  # one round while both keep writing: the clusters interleave differently
            assert run_level(topo, level, settings).ok
        done = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "fo-aa", 150)
        expected = flowing.stop()
    converge(topo, settings)
    # the lag monitor's preview first: the status page's promise, which the failover below must keep
    from airflow.models import Variable

    Variable.set(OWNERS_VARIABLE, json.dumps({"fo-aa": "c1"}))  # as mirror_offsets records it
    monitor = build_lag_monitor_dag(topo).test()
    assert monitor.state == "success"
    promised = xcom(monitor, "measure")["failover"]["fo-aa"]
    assert promised == lag_snapshot()["failover"]["fo-aa"]
    assert promised["owner"] == "c1" and sorted(promised["targets"]) == ["c2", "c3", "c4"], promised
    assert all(t["skip"] == 0 and t["why"] is None for t in promised["targets"].values()), promised
    for cluster in ("c2", "c3", "c4"):  # read-only: the preview committed nothing
        assert committed_offsets(kafka_clusters[cluster].bootstrap, topic, "fo-aa", 2) == [-1001, -1001]

    # c4, on the other side of the tree: it orders the two origins unlike c1 (c2 copies c1's order as it is)
    run = build_failover_dag(topo).test(run_conf=failover_conf(groups=["fo-a.*"], to_cluster="c4"))
    assert run.state == "success"
    rest = read_from_committed(kafka_clusters["c4"].bootstrap, topic, "fo-aa", 2)
    skipped = set(expected) - set(done) - set(rest)
    assert not skipped, f"{len(skipped)} messages skipped, e.g. {sorted(skipped)[:3]}"
    replayed = len(set(done) & set(rest))
    rows = xcom(run, "switch")["plan"]["rows"]
    assert replayed == sum(r["expected_replay"] for r in rows)
    preview = promised["targets"]["c4"]
    assert (preview["replay"], preview["skip"]) == (replayed, len(skipped)), (preview, rows)
    assert preview["replay_by_partition"] == {f"{r['topic']}[{r['partition']}]": r["expected_replay"]
                                              for r in rows if r["expected_replay"]}


def test_mirror_offsets_positions_idle_clusters_and_is_idempotent(kafka_clusters, make_topic, as_current, owners):
    topic = topic_everywhere(make_topic)
    topo = as_current(topology(kafka_clusters, FOUR, [topic]))
    expected = traffic(kafka_clusters, "c1", topic, 120)
    converge(topo, clients(kafka_clusters, topo))
    done = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "mo-group", 70)
    member = Member(kafka_clusters["c1"].bootstrap, topic, "mo-group")  # runs on c1, no new commits
    try:
        member.wait_joined("c1")
        dag = build_offsets_dag(topo)
        first = dag.test()
        assert first.state == "success"
        assert owners()["mo-group"] == "c1"
        assert xcom(first, "commit")["committed"]["c4"] == 2
        second = dag.test()
        assert second.state == "success"
        assert xcom(second, "commit")["committed"] == {"c1": 0, "c2": 0, "c3": 0, "c4": 0}
    finally:
        member.stop()
    for cluster in ("c2", "c3", "c4"):
        rest = read_from_committed(kafka_clusters[cluster].bootstrap, topic, "mo-group", 2)
        assert Counter(done) + Counter(rest) == Counter(expected), cluster


def test_emergency_failover_with_the_source_killed(kafka_clusters, make_topic, as_current, owners):
    topic = topic_everywhere(make_topic)
    topo = as_current(topology(kafka_clusters, FOUR, [topic]))
    expected = traffic(kafka_clusters, "c1", topic, 200)
    converge(topo, clients(kafka_clusters, topo))
    done = consume_and_commit(kafka_clusters["c1"].bootstrap, topic, "fo-emergency", 90)
    from airflow.models import Variable

    Variable.set(OWNERS_VARIABLE, json.dumps({"fo-emergency": "c1"}))
    started = time.time()
    assert build_offsets_dag(topo).test().state == "success"  # the last positions c1 publishes
    distributed = time.time()
    c1 = kafka_clusters["c1"]
    c1.kill()
    killed = time.time()
    try:
        run = build_failover_dag(topo).test(run_conf=failover_conf(groups=["fo-emergency"], mode="emergency"))
        ended = time.time()
        assert run.state == "success"
        # published between `started` and `distributed`, used between `killed` and `ended`
        reported = xcom(run, "switch")["oldest_position_s"]
        assert killed - distributed - 1 <= reported <= ended - started + 1, (reported, killed - distributed,
                                                                              ended - started)
    finally:
        if not c1.is_running():
            c1.start()
    rest = read_from_committed(kafka_clusters["c4"].bootstrap, topic, "fo-emergency", 2)
    assert Counter(done) + Counter(rest) == Counter(expected)
    assert owners()["fo-emergency"] == "c4"


def test_mirror_offsets_leaves_a_group_whose_owner_a_failover_moved_during_its_run(owners):
    """The run's owners step saw c1; a failover then recorded c2: this run's commit must not touch the group."""
    from airflow.models import Variable

    from mirrorflow_airflow.steps.offsets import unchanged_owners

    Variable.set(OWNERS_VARIABLE, json.dumps({"moved": "c2", "stayed": "c1"}))
    assert unchanged_owners("", {"moved": "c1", "stayed": "c1", "new": "c3"}) == {"stayed": "c1", "new": "c3"}
