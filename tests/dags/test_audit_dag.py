"""mirror_audit under dag.test(): a converged four-cluster tree under traffic is complete; a loss fails it by name.

Each window proven complete on a cluster is one event of its proven asset, once; a window with a missing
message is never announced on the cluster that misses it; a window whose announcing run died after the
ledger write is announced by the next run, once.
"""

from __future__ import annotations

import time

import pytest

from mirrorflow.assets import proven_uri
from mirrorflow.completeness.proven import window_key
from mirrorflow_airflow.factories.audit import build_audit_dag
from mirrorflow_dev.dag_parsing import parsed
from tests.dags.dag_runs import asset_events, task_state, xcom
from tests.integration.kafka_io import lose, produce, read_all
from tests.integration.mirroring import FOUR, Traffic, clients, converge, run_level, topic_everywhere, topology

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

NAMES = ["c1", "c2", "c3", "c4"]


def test_the_audit_dag_finds_the_tree_complete_under_traffic_and_fails_naming_a_loss(kafka_clusters, make_topic,
                                                                                     audit_result_cleared):
    topic = topic_everywhere(make_topic)
    topo = topology(kafka_clusters, FOUR, [topic], extra="audit: {window_minutes: 10, grace_minutes: 1}\n")
    settings = clients(kafka_clusters, topo)
    hour_ago = int(time.time() * 1000) - 3_600_000  # final windows: an hour old (copies keep the timestamp)
    for c in NAMES:
        produce(kafka_clusters[c].bootstrap, topic,
                [(f"{c}-k{i % 5}".encode(), f"{c}|{i}".encode(), None, hour_ago + i) for i in range(30)])
    converge(topo, settings)
    dag = parsed(build_audit_dag(topo))

    with Traffic(kafka_clusters, topic, NAMES, batch=5, interval=0.2) as flowing:  # new messages keep coming
        flowing.wait_for(40)
        for level in topo.levels:
            assert run_level(topo, level, settings).ok
        complete = dag.test()
        flowing.wait_for(len(flowing.ids) + 20)
    assert complete.state == "success"
    summary = xcom(complete, "count")
    assert summary["judged"] >= 4 and summary["complete"] == summary["judged"] and not summary["differences"]
    # every final window is proven on every cluster: one asset event each, the window's start its partition key
    windows = sorted({window_key(ts - ts % 600_000) for ts in range(hour_ago, hour_ago + 30)})
    for c in NAMES:
        events = asset_events(proven_uri(c, topic))
        assert sorted(key for key, _ in events) == windows, (c, events)
        assert all(extra["audit_run"] == complete.run_id for _, extra in events)
    assert summary["pending"] >= 1  # this minute's windows wait for their grace period
    assert all(summary["read"][c] >= 120 for c in NAMES), summary["read"]

    converge(topo, settings)
    again = dag.test()  # reads only what arrived since
    assert again.state == "success"
    assert not xcom(again, "count")["proven"] and not asset_events(proven_uri("c1", topic), again)  # said once
    read = xcom(again, "count")["read"]
    held = {c: len(read_all(kafka_clusters[c].bootstrap, topic, 2)) for c in NAMES}
    assert {c: summary["read"][c] + read[c] for c in NAMES} == held  # each record read once, over the two runs

    # one more message in a later window, final already, reaches every cluster; c4 deletes it before the next
    # audit reads it: the window is proven on c1, c2 and c3, and never on c4
    later = hour_ago + 1_200_000
    produce(kafka_clusters["c1"].bootstrap, topic, [(b"c1-late", b"c1|late", None, later)])
    converge(topo, settings)
    lose(kafka_clusters["c4"].bootstrap, topic, 2, b"c1|late")
    failed = dag.test()
    assert failed.state == "failed"
    [difference] = xcom(failed, "count")["differences"]
    assert (difference["topic"], difference["origin"], difference["cluster"]) == (topic, "c1", "c4")
    assert difference["window_ms"] == later - later % 600_000
    assert difference["expected"] - difference["held"] == 1 and difference["missing_count"] >= 1
    proven = {c: [key for key, _ in asset_events(proven_uri(c, topic), failed)] for c in NAMES}
    assert proven == {"c1": [window_key(later - later % 600_000)], "c2": [window_key(later - later % 600_000)],
                      "c3": [window_key(later - later % 600_000)], "c4": []}, proven

    # the lag monitor counts the audit's difference as an SLA violation, naming it
    from mirrorflow_airflow.factories.lag_monitor import build_lag_monitor_dag
    from mirrorflow_airflow.state import read_lag_snapshot

    monitored = build_lag_monitor_dag(topo).test()
    assert monitored.state == "failed"
    [violation] = [v for v in read_lag_snapshot("")["violations"] if v.startswith("completeness audit of ")]
    assert f"topic {topic} window " in violation and "origin c1 on c4" in violation


PAIR = """
  level: 1
  children: [c1, c2]
"""


def test_a_window_proven_by_a_run_that_died_after_the_ledger_write_is_announced_by_the_next_run_once(
        kafka_clusters, make_topic, audit_result_cleared, monkeypatch):
    import mirrorflow_airflow.steps.audit as steps

    names = ["c1", "c2"]
    topic = topic_everywhere(make_topic, names, partitions=1)
    topo = topology(kafka_clusters, PAIR, [topic], names, extra="audit: {window_minutes: 10, grace_minutes: 1}\n")
    hour_ago = int(time.time() * 1000) - 3_600_000
    produce(kafka_clusters["c1"].bootstrap, topic, [(b"k", f"c1|{i}".encode(), None, hour_ago) for i in range(3)])
    converge(topo, clients(kafka_clusters, topo))
    dag = build_audit_dag(topo)
    for t in dag.tasks:
        t.retries = 0  # a failed try ends the task: no retry delay to wait out under dag.test()
    parsed(dag)
    window = window_key(hour_ago - hour_ago % 600_000)

    def events(cluster: str) -> list[str]:
        return [key for key, _ in asset_events(proven_uri(cluster, topic))]

    # count dies right after the ledger write: before the Variable, the XCom and every event
    def killed(ns, summary):
        raise RuntimeError("the count task is killed after the ledger write (test)")

    with monkeypatch.context() as patched:
        patched.setattr(steps, "set_audit_result", killed)
        died = dag.test()
    assert task_state(died, "count") == "failed" and events("c1") == events("c2") == []

    # the next run announces the window on c1; c2's announcing task dies before its event registers
    real_emit = steps.emit_proven

    def emit_but_c2_dies(outlet_events, windows, run_id, ns=""):
        if any(w["cluster"] == "c2" for w in windows):
            raise RuntimeError("the announcing task of c2 is killed (test)")
        return real_emit(outlet_events, windows, run_id, ns)

    with monkeypatch.context() as patched:
        patched.setattr(steps, "emit_proven", emit_but_c2_dies)
        recovered = dag.test()
    assert [(w["cluster"], w["window"], w.get("again")) for w in xcom(recovered, "count")["proven"]] == [
        ("c1", window, True), ("c2", window, True)]
    assert events("c1") == [window] and events("c2") == []

    # then c2's is announced; c1's, which Airflow holds, is marked announced, not said again
    third = dag.test()
    assert third.state == "success" and xcom(third, "count")["announce_confirmed"] == {"c1": 1}
    assert events("c1") == [window] and events("c2") == [window]
    fourth = dag.test()
    assert fourth.state == "success" and xcom(fourth, "count")["announce_confirmed"] == {"c2": 1}
    assert not xcom(fourth, "count")["proven"] and events("c1") == events("c2") == [window]
