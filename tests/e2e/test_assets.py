"""A user's DAG scheduled on the audit's proven asset, under the real scheduler: one run per proven window.

``airflow standalone`` (scheduler, dag-processor, LocalExecutor, SQLite) on a DAG
folder holding ``mirror_audit`` (this repo's file) and a DAG of the user's, written
as docs/assets.md shows: ``PartitionedAssetTimetable`` on ``proven("c4", topic)``.
The session's clusters c1..c4 hold, after the tree converged, two final windows of
the topic: ``W1`` everywhere, and ``W2`` whose one message c4 lost (deleted before
the audit read it). The audit run, triggered through the REST API, proves ``W1`` on
every cluster and ``W2`` on c1..c3 only; the scheduler then starts the user's DAG
once, for ``W1``, and never for ``W2``.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorflow.completeness.proven import window_key
from mirrorflow.topology import parse_topology
from mirrorflow_dev.process import wait_until
from tests.fixtures.kafka import wait_for_topic
from tests.fixtures.standalone import REPO, Standalone
from tests.integration.kafka_io import produce, read_all
from tests.integration.mirroring import FOUR, clients, converge

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.timeout(900)]

CLUSTERS = ("c1", "c2", "c3", "c4")
USER_DAG = "orders_proven_on_c4"

USER_DAG_FILE = '''\
"""A user's DAG: one run per window of {topic} proven complete on c4 (docs/assets.md)."""
from airflow.sdk import DAG, PartitionedAssetTimetable, task

from mirrorflow_airflow.assets import proven

with DAG("{dag_id}", schedule=PartitionedAssetTimetable(assets=proven("c4", "{topic}")), catchup=False):

    @task
    def load(**context):
        return context["partition_key"]

    load()
'''


def test_a_users_dag_on_the_proven_asset_runs_once_per_proven_window_and_never_for_an_incomplete_one(
        kafka_clusters, tmp_path):
    topic = f"assets-{uuid.uuid4().hex[:8]}"
    text = "\n".join(["name: assets", "clusters:", *(f'  {n}: {{bootstrap: "{kafka_clusters[n].bootstrap}"}}'
                                                     for n in CLUSTERS)])
    text += f"\ntree:{FOUR}topics: [\"{topic}\"]\naudit: {{window_minutes: 10, grace_minutes: 1}}\n"
    topology_file = tmp_path / "topology.yaml"
    topology_file.write_text(text)
    topology = parse_topology(text, source=str(topology_file))
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "mirror_audit.py").write_text((REPO / "dags" / "mirror_audit.py").read_text())
    (dags / f"{USER_DAG}.py").write_text(USER_DAG_FILE.format(topic=topic, dag_id=USER_DAG))

    standalone = Standalone(tmp_path / "airflow", topology_file, dags_folder=dags).launch()  # boots meanwhile
    try:
        # two final windows: W1 on partition 0, W2 (twenty minutes later) on partition 1
        for name in CLUSTERS:
            admin = AdminClient({"bootstrap.servers": kafka_clusters[name].bootstrap})  # kept while it works
            admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
            wait_for_topic(kafka_clusters[name].bootstrap, topic)
        hour_ago = int(time.time() * 1000) - 3_600_000
        w1, w2 = hour_ago - hour_ago % 600_000, hour_ago - hour_ago % 600_000 + 1_200_000
        for i, name in enumerate(CLUSTERS):
            produce(kafka_clusters[name].bootstrap, topic, [(f"{name}-k".encode(), f"{name}|w1|{n}".encode(), None,
                                                            w1 + 1000 * i + n) for n in range(5)], partition=0)
        produce(kafka_clusters["c1"].bootstrap, topic, [(b"c1-late", b"c1|w2", None, w2 + 5)], partition=1)
        converge(topology, clients(kafka_clusters, topology))
        c4 = kafka_clusters["c4"].bootstrap
        [lost] = [r for r in read_all(c4, topic, 2) if r.value == b"c1|w2"]
        admin = AdminClient({"bootstrap.servers": c4})  # referenced until its futures are done
        for future in admin.delete_records([TopicPartition(topic, lost.partition, lost.offset + 1)],
                                           request_timeout=30).values():
            future.result(timeout=30)

        standalone.wait_ready(["mirror_audit"])
        wait_until(f"{USER_DAG} to be listed", lambda: _listed(standalone, USER_DAG), 300, 3,
                   standalone.import_errors)
        standalone.api("PATCH", f"/dags/{USER_DAG}", {"is_paused": False})
        audit = standalone.api("POST", "/dags/mirror_audit/dagRuns", {"logical_date": None})
        wait_until("the audit run to end", lambda: _state(standalone, "mirror_audit", audit["dag_run_id"])
                   in ("success", "failed"), 300, 2, lambda: standalone.task_logs("mirror_audit"))
        # it fails, naming c4's loss; the window it proved on c4 is announced all the same
        assert _state(standalone, "mirror_audit", audit["dag_run_id"]) == "failed"
        wait_until(f"a run of {USER_DAG} to succeed",
                   lambda: any(r["state"] == "success" for r in standalone.dag_runs(USER_DAG)), 300, 2,
                   lambda: standalone.task_logs(USER_DAG) + standalone.logged_errors())
        runs = standalone.dag_runs(USER_DAG)
        assert [r.get("partition_key") for r in runs] == [window_key(w1)], runs
        events = standalone.api("GET", "/assets/events?limit=100")["asset_events"]
        proven_on = {(e["uri"], e.get("partition_key")) for e in events if e["uri"].startswith("mirrorflow-proven://")}
        assert proven_on == {(f"mirrorflow-proven://{c}/{topic}", window_key(w)) for c in CLUSTERS
                             for w in (w1, w2) if (c, w) != ("c4", w2)}, proven_on
    finally:
        standalone.stop()


def _listed(standalone: Standalone, dag_id: str) -> bool:
    try:
        return standalone.api("GET", f"/dags/{dag_id}")["dag_id"] == dag_id
    except Exception:  # noqa: BLE001 - not parsed yet
        return False


def _state(standalone: Standalone, dag_id: str, run_id: str) -> str:
    return next((r["state"] for r in standalone.dag_runs(dag_id) if r["dag_run_id"] == run_id), "")

