"""One topology in every context that parses the DAG files: the file plus the stored cluster changes.

Airflow 3 parses DAG files in the dag-processor and task runners (where the Task
SDK serves Variables) and in plain processes: ``airflow dags test``, ``airflow
dags details``, a DagBag in a test. In a plain process the Task SDK's
``Variable.get`` answers ``None`` without a word, so a cluster added by
``mirror_onboard_cluster`` (kept in the Variable ``mirrorflow_topology_changes``)
would be missing there: the level runs of ``airflow dags test`` would copy the
old tree. These tests parse the real way, in real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mirrorflow_airflow.state import CHANGES_VARIABLE
from tests.integration.mirroring import THREE, topic_everywhere, topology

pytestmark = [pytest.mark.airflow, pytest.mark.kafka, pytest.mark.usefixtures("spark_default_connect")]



def _airflow(*args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    airflow = os.path.join(os.path.dirname(sys.executable), "airflow")
    return subprocess.run([airflow, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _lineage_to(receiver) -> dict[str, str]:
    """The environment that switches OpenLineage on, sending to ``receiver`` (as docs/lineage.md shows)."""
    return {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
        {"type": "http", "url": f"http://127.0.0.1:{receiver.port}", "endpoint": "api/v1/lineage"}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "mirrorflow-tests"}


def _completed(receiver, job: str) -> list[dict]:
    """The OpenLineage COMPLETE events of ``job`` (``<dag id>.<task id>``) the receiver got, waited for."""
    def matching(items: list) -> list:
        return [i["body"] for i in items if i["path"] == "/api/v1/lineage" and i["body"].get("eventType") ==
                "COMPLETE" and i["body"].get("job", {}).get("name") == job]
    return matching(receiver.wait_until(matching, timeout=60))


def _namespaces(kafka_clusters) -> dict[str, str]:
    return {c: f"kafka://{kafka_clusters[c].bootstrap.split(',')[0]}" for c in ("c1", "c2", "c3", "c4")}


def _copied(output: str) -> int:
    """The records a level run copied, from its ``copy_run`` audit line in ``airflow dags test``'s output."""
    runs = [json.loads(line[line.index("{"):line.rindex("}") + 1]) for line in output.splitlines()
            if '"event":"copy_run"' in line]
    assert runs, output[-3000:]
    return sum(r["copied"] for r in runs)


def test_a_fourth_cluster_onboarded_under_traffic_is_in_every_parse_and_every_dag_runs_by_airflow_dags_test(
        kafka_clusters, make_topic, operator_state, tmp_path, monkeypatch, receiver):
    """c4 joins next to c3 while c1..c3 produce; the onboarding and every level run are ``airflow dags test``.

    Between them, the grown tree (the file plus the stored change) is what every parse sees: a DagBag
    in this process, as ``dag.test()`` users parse, and the CLI's plain processes. The lineage of the
    backfill and of the first level run goes to a real HTTP receiver, OpenLineage switched on the way
    docs/lineage.md tells a user (a transport in the environment) for those processes only: its
    listener is a plugin, registered when a process loads Airflow's plugins.
    """
    from airflow.dag_processing.dagbag import DagBag

    from tests.dags.forms import onboard_form
    from tests.integration.mirroring import Traffic, assert_exactly_once, clients, converge, traffic

    topic = topic_everywhere(make_topic, ("c1", "c2", "c3"), partitions=2)
    topo = topology(kafka_clusters, THREE, [topic], names=("c1", "c2", "c3"))
    path = tmp_path / "topology.yaml"
    path.write_text(topo.to_yaml())
    monkeypatch.setenv("MIRROR_TOPOLOGY", str(path))
    env = {**os.environ, "MIRROR_TOPOLOGY": str(path)}
    expected = [m for c in ("c1", "c2", "c3") for m in traffic(kafka_clusters, c, topic, 100)]
    converge(topo, clients(kafka_clusters, topo))  # the three-cluster tree in sync before c4 comes

    with Traffic(kafka_clusters, topic, ["c1", "c2", "c3"], batch=5, interval=0.2) as flowing:
        onboard = _airflow("dags", "test", "mirror_onboard_cluster", "-c", json.dumps(onboard_form(kafka_clusters)),
                           env={**env, **_lineage_to(receiver)}, timeout=900)
        assert onboard.returncode == 0, (onboard.stdout + onboard.stderr)[-4000:]
        flowing.wait_for(len(flowing.ids) + 30)
    expected += flowing.ids
    [backfill] = _completed(receiver, "mirror_onboard_cluster.backfill")
    ns = _namespaces(kafka_clusters)
    assert (ns["c3"], topic) in {(d["namespace"], d["name"]) for d in backfill["inputs"]}
    [out] = [d for d in backfill["outputs"] if (d["namespace"], d["name"]) == (ns["c4"], topic)]
    assert out["outputFacets"]["mirrorflow_copy"]["links"] == ["c3.L1"]
    assert out["outputFacets"]["outputStatistics"]["rowCount"] >= 300  # the three clusters' 100 each, and more
    assert [e["cluster"] for e in operator_state(CHANGES_VARIABLE, "[]")] == ["c4"]

    # a DagBag in this process, and the CLI's plain processes (parse and store the DAGs, then show what was
    # stored): each sees the grown tree
    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    assert bag.get_dag("mirror_level_1").description.endswith("(4 links)")
    stored = _airflow("dags", "reserialize", env=env)
    assert stored.returncode == 0, stored.stderr[-3000:]
    details = _airflow("dags", "details", "mirror_level_1", "-o", "json", env=env)
    assert details.returncode == 0, details.stderr[-3000:]
    assert "(4 links)" in details.stdout, details.stdout[-2000:]

    # the grown tree's level runs, each one airflow dags test: c4's own traffic and what flowed meanwhile
    # reach every cluster in one pass of levels 1, 3, 1 (pairs, across, pairs again)
    expected += traffic(kafka_clusters, "c4", topic, 20)
    copied = []
    for n, level in enumerate((1, 3, 1)):
        lineage = _lineage_to(receiver) if n == 0 else {}
        run = _airflow("dags", "test", f"mirror_level_{level}", env={**env, **lineage}, timeout=900)
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
        copied.append(_copied(run.stdout + run.stderr))
    assert copied[0] >= 20
    assert_exactly_once(kafka_clusters, ["c1", "c2", "c3", "c4"], topic, expected)

    # the first level run's lineage: every link's source topic an input, its target topic an output written
    # by that link (c4's new link c3.L1 among them), the rows it wrote adding up to what the run copied
    [event] = _completed(receiver, "mirror_level_1.copy")
    assert sorted((d["namespace"], d["name"]) for d in event["inputs"]) == sorted((ns[c], topic) for c in ns)
    outputs = {d["namespace"]: d for d in event["outputs"]}
    assert sorted(outputs) == sorted(ns.values())
    for source, target in (("c1", "c2"), ("c2", "c1"), ("c3", "c4"), ("c4", "c3")):
        out = outputs[ns[target]]
        assert out["name"] == topic
        assert out["outputFacets"]["mirrorflow_copy"]["links"] == [f"{source}.L1"]
        assert out["outputFacets"]["mirrorflow_copy"]["sources"] == [
            {"namespace": ns[source], "name": topic, "cluster": source}]
        assert out["facets"]["symlinks"]["identifiers"][0]["name"] == f"{target}/{topic}"
    assert sum(o["outputFacets"]["outputStatistics"]["rowCount"] for o in outputs.values()) == copied[0]
    assert outputs[ns["c3"]]["outputFacets"]["outputStatistics"]["rowCount"] >= 20  # c4's own, over c4.L1
