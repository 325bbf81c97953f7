"""Every operator DAG on secured clusters, the principal holding exactly the derived ACLs, and no secret leaks.

The secured clusters of tests.fixtures.secured: c1..c3 over SASL_SSL/SCRAM, c4 over
mutual TLS with its key inline, each named by an ``AIRFLOW_CONN_*`` connection.
The principal gets exactly ``python -m mirrorflow.acls`` for the topology as it
will be once c4 has joined (every role), nothing more. The first level run
copies with ``spark-submit`` on ``local[*]`` (Spark's event log on); from then on
the level runs, the onboarding's backfill and the decommission's drain go to a
real Spark Connect server (the ``spark_default`` connection becomes a
``spark_connect`` one), except one level run on a Spark standalone cluster. (One
level run per ``spark-submit`` path: each starts a driver JVM, an executor JVM on
the standalone cluster, and carries the same secrets as the other level's would.)

The story: the three-cluster tree converges; ``mirror_schemas`` syncs the
primary's storage topic keeping ids; ``mirror_archive`` writes c3 to S3; c4 is
onboarded next to c3 with a backfill; the grown tree converges; a group's
positions travel (``mirror_offsets``) and a planned failover with ``exact``
precision moves it to c4 skipping and replaying nothing; ``mirror_lag_monitor``
measures; ``mirror_audit`` finds the tree complete; ``mirror_switch_target``
moves c1's level-3 link to c4; ``mirror_decommission_cluster`` takes c4 out
again, losing nothing.

While they run, a sampler reads every process's command line. Afterwards the
password and every line of the private key are searched for in everything a
secret could reach: the task logs (what ``dag.test()`` prints and logs, audit lines
included), every XCom, Spark's event logs, the Connect server's log, the
standalone cluster's logs and work directories (its executors' output) and the
process list.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import pytest
import yaml

from mirrorflow.kafka.compacted import ensure_compacted
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.needed_acls import principal_of, required_acls
from mirrorflow.schemas.topic_store import TOPIC_CONFIG
from mirrorflow.topology import Topology
from mirrorflow.topology.changes import apply_changes
from mirrorflow_airflow.state import CHANGES_VARIABLE, OWNERS_VARIABLE, TARGETS_VARIABLE
from tests.dags.dag_runs import xcom
from tests.fixtures.secured import connections_env
from tests.fixtures.spark import connect_connection
from tests.integration.groups import consume_and_commit, read_from_committed
from tests.integration.mirroring import FOUR, THREE, assert_exactly_once, traffic
from tests.integration.registry import PrimaryRegistry, registry_state
from tests.integration.schemas import EVENT, ORDER
from tests.processes import CommandLines

pytestmark = [pytest.mark.airflow, pytest.mark.kafka, pytest.mark.spark]


def all_xcom_values() -> str:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return "\n".join(json.dumps(XComModel.deserialize_value(row), default=str)
                         for row in session.query(XComModel).all())


def leaks(places: dict[str, str], password: str, key_pem: str, **others: str) -> list[str]:
    """Where the password, any line of the private key or one of ``others`` shows up in ``places`` (name -> text)."""
    key_body = [line for line in key_pem.splitlines() if line and "-----" not in line]
    secrets = {"the SCRAM password": password, **{f"the private key (line {i})": line
                                                  for i, line in enumerate(key_body)},
               **{what.replace("_", " "): secret for what, secret in others.items()}}
    return [f"{what} in the {where}" for where, text in places.items() for what, secret in secrets.items()
            if secret in text]


STORAGE = "_schemas"
GROUP = "secops-app"


@pytest.fixture
def results_cleared(airflow_home):
    """The audit's result and the lag snapshot are this test's: later tests must not see them."""
    from airflow.models import Variable

    from mirrorflow_airflow.state import AUDIT_RESULT_VARIABLE, LAG_SNAPSHOT_VARIABLE

    yield
    Variable.delete(AUDIT_RESULT_VARIABLE)
    Variable.delete(LAG_SNAPSHOT_VARIABLE)


def _topology(conn_ids: dict[str, str], tree: str, topic: str) -> Topology:
    return Topology.parse({
        "clusters": {n: {"conn_id": c} for n, c in conn_ids.items()},
        "tree": yaml.safe_load(tree), "topics": [topic],
        "offsets": {"groups": ["secops-.*"]},
        "schemas": {"primary": "c1"},
        "archive": {"clusters": ["c3"], "schedule": "1h"},
        "audit": {"window_minutes": 10, "grace_minutes": 1},
    })


def _levels(dags, topology: Topology, rounds: int, levels: list[int] | None = None) -> int:
    copied = 0
    for _ in range(rounds):
        for level in levels or topology.levels:
            run = dags[f"mirror_level_{level}"].test()
            assert run.state == "success", xcom(run, "copy")
            copied += xcom(run, "copy")["copied"]
    return copied


def test_every_role_works_on_secured_clusters_with_exactly_its_acls_and_no_secret_leaks(
        airflow_home, mirrorflow_acls, spark_connect_server, spark_standalone, s3_bucket, operator_state,
        results_cleared, monkeypatch, tmp_path, caplog, capfd):
    from mirrorflow_airflow.factories.archive import build_archive_dag
    from mirrorflow_airflow.factories.audit import build_audit_dag
    from mirrorflow_airflow.factories.decommission import build_decommission_dag
    from mirrorflow_airflow.factories.failover import build_failover_dag
    from mirrorflow_airflow.factories.lag_monitor import build_lag_monitor_dag
    from mirrorflow_airflow.factories.levels import build_level_dags
    from mirrorflow_airflow.factories.offsets import build_offsets_dag
    from mirrorflow_airflow.factories.onboard import build_onboard_dag
    from mirrorflow_airflow.factories.schemas import build_schemas_dag
    from mirrorflow_airflow.factories.switch import build_switch_dag

    secured = mirrorflow_acls
    kafka = secured.kafka
    settings = {name: secured.scram(name) for name in ("c1", "c2", "c3")}
    settings["c4"] = secured.mtls("c4")
    conn_ids = {name: f"mf_ops_{name}_{uuid.uuid4().hex[:4]}" for name in settings}
    for key, value in connections_env({conn_ids[n]: s for n, s in settings.items()}).items():
        monkeypatch.setenv(key, value)
    # Spark's event log, where a secret in Spark's configuration would show
    events = tmp_path / "spark-events"
    events.mkdir()
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    monkeypatch.setenv("AIRFLOW_CONN_MIRRORFLOW_ARCHIVE", json.dumps({
        "conn_type": "aws", "login": s3_bucket.access_key_id, "password": s3_bucket.secret_access_key,
        "extra": {"endpoint_url": s3_bucket.endpoint_url, "region_name": s3_bucket.region,
                  "bucket": s3_bucket.bucket, "prefix": "history"}}))
    topic = f"secops{uuid.uuid4().hex[:6]}.orders"
    three = _topology({n: conn_ids[n] for n in ("c1", "c2", "c3")}, THREE, topic)
    four = _topology(conn_ids, FOUR, topic)
    current = tmp_path / "topology.yaml"  # what sensors and triggers load: the file, plus the stored changes
    current.write_text(three.to_yaml())
    monkeypatch.setenv("MIRROR_TOPOLOGY", str(current))
    principals = {n: principal_of(s) for n, s in settings.items()}
    granted = required_acls(four, principals)
    secured.grant_acls(granted)

    # the application's side, as the set-up super user: the topic where it is produced, the primary registry
    from confluent_kafka.admin import AdminClient, NewTopic
    for origin in ("c1", "c3"):
        admin = AdminClient(secured.admin(origin))  # kept: a collected client cancels its futures
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    hour_ago = int(time.time() * 1000) - 3_600_000  # final audit windows at once (copies keep the timestamp)
    expected = [i for origin in ("c1", "c3") for i in traffic(kafka, origin, topic, 30, now_ms=hour_ago)]
    ensure_compacted(ClusterClient("c1", secured.admin("c1")), STORAGE, TOPIC_CONFIG)
    registry = PrimaryRegistry(secured.admin("c1"), STORAGE)
    ids = {registry.register("orders-value", ORDER), registry.register("events-value", EVENT, "JSON")}

    with CommandLines() as processes:
        # the three-cluster tree converges (target topics created by the copies): a first level run with
        # spark-submit on local[*], then the copies (level runs, the backfill, the drain) go to Spark Connect
        three_dags = build_level_dags(three)
        assert _levels(three_dags, three, 1, levels=[1]) > 0  # c1's messages to c2
        assert any("org.apache.spark.deploy.SparkSubmit" in c for c in processes.text())  # the sampler saw it
        connect = connect_connection(spark_connect_server)
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", connect)
        _levels(three_dags, three, 1, levels=[3])  # the rest of the first round, then a second one
        _levels(three_dags, three, 1)
        assert_exactly_once(kafka, ["c1", "c2", "c3"], topic, expected)

        # schemas through the storage topic: every target holds the primary's ids
        schemas = build_schemas_dag(three).test(run_conf={"dry_run": False})
        assert schemas.state == "success"
        for target in ("c2", "c3"):
            held = registry_state(secured.admin(target), target, STORAGE)
            assert {(e["id"], e["version"]) for e in held.entries.values() if "id" in e} >= ids, target

        # the archive of c3
        archived = build_archive_dag(three).test()
        assert archived.state == "success"
        assert xcom(archived, "archive")["archived"] == len(expected)

        # c4 (mutual TLS) joins next to c3 with a backfill of what c3 retains
        onboard = build_onboard_dag(three).test(run_conf={
            "cluster": "c4", "bootstrap": None, "conn_id": conn_ids["c4"], "sibling_of": "c3", "level": 1,
            "topics": [], "backfill": "retained", "since": None, "schemas": True, "adopt": False,
            "dry_run": False})
        assert onboard.state == "success", {t: xcom(onboard, t) for t in ("preflight", "backfill", "verify")}
        assert xcom(onboard, "backfill")["lost_to_retention"] == 0
        grown = apply_changes(three, operator_state(CHANGES_VARIABLE, "[]"))
        assert sorted(required_acls(grown, principals)) == sorted(granted), "the grown tree needs other ACLs"

        # the grown tree converges, c4's own traffic included
        expected += traffic(kafka, "c4", topic, 20, now_ms=hour_ago)
        grown_dags = build_level_dags(grown)
        _levels(grown_dags, grown, 1, levels=[1, 3, 1])  # pairs, across, pairs again
        assert _levels(grown_dags, grown, 1, levels=[3, 1]) == 0  # and every link has read what it must pass over
        assert_exactly_once(kafka, ["c1", "c2", "c3", "c4"], topic, expected)
        held = registry_state(secured.admin("c4"), "c4", STORAGE)
        assert {(e["id"], e["version"]) for e in held.entries.values() if "id" in e} >= ids, "c4's schemas"

        # a group's positions travel, then a planned failover with exact precision moves it to c4
        done = consume_and_commit(secured.admin("c1"), topic, GROUP, 50)
        assert build_offsets_dag(grown).test().state == "success"
        failover = build_failover_dag(grown).test(run_conf={
            "groups": [GROUP], "from_cluster": "c1", "to_cluster": "c4", "mode": "planned", "precision": "exact",
            "dry_run": False, "force": False})
        assert failover.state == "success"
        # c1 and c3 interleave differently on c4 (c3's history came first by the backfill): a position
        # on c4 cannot put all of them behind the group, so it replays what it must and says how much
        replay = sum(r["expected_replay"] for r in xcom(failover, "switch")["plan"]["rows"])
        rest = read_from_committed(secured.admin("c4"), topic, GROUP, 2)
        read = Counter(done) + Counter(rest)
        assert not Counter(expected) - read, "skipped on c4"
        assert sum((read - Counter(expected)).values()) == replay, "replayed other than the plan said"
        assert operator_state(OWNERS_VARIABLE)[GROUP] == "c4"

        # the lag monitor measures; the audit finds every final window complete
        lag = build_lag_monitor_dag(grown).test()
        assert lag.state == "success"
        measured = xcom(lag, "measure")
        links = [r for r in measured["links"] if r["topic"] == topic]
        assert links and all(r["records"] == 0 for r in links), links  # converged: nothing behind
        on_c4 = [r for r in measured["groups"] if r["group"] == GROUP and r["cluster"] == "c4"]
        assert on_c4 and all(r["records"] is not None for r in on_c4), measured["groups"]  # the moved group
        audit = build_audit_dag(grown).test()
        assert audit.state == "success"
        summary = xcom(audit, "count")
        assert summary["judged"] >= 1 and summary["complete"] == summary["judged"], summary

        # c1's level-3 link moves to c4, and c4 leaves again: nothing lost, nothing twice
        switch = build_switch_dag(grown).test(run_conf={"source_cluster": "c1", "level": 3, "target": "c4",
                                                        "dry_run": False, "force": False})
        assert switch.state == "success"
        assert operator_state(TARGETS_VARIABLE)["c1.L3"] == "c4"  # (c2.L3 stays pinned to c3 by the onboarding)
        expected += traffic(kafka, "c1", topic, 20, start=1000)
        _levels(grown_dags, grown, 1, levels=[1])  # c1's messages to c2, on Spark Connect
        # c1's level 3 (to c4 now) on a Spark standalone cluster: the executors are the worker's, in its own processes
        master, work_dir = spark_standalone
        host, port = master.removeprefix("spark://").split(":")
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({
            "conn_type": "spark", "host": f"spark://{host}", "port": int(port),
            "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"}}))
        monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        apps = set(work_dir.glob("app-*"))
        assert _levels(grown_dags, grown, 1, levels=[3]) > 0
        assert set(work_dir.glob("app-*")) > apps, "nothing ran on the standalone cluster"
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", connect)
        expected += traffic(kafka, "c4", topic, 10, start=1000)
        decommission = build_decommission_dag(grown).test(run_conf={"cluster": "c4", "force": False,
                                                                     "dry_run": False})
        assert decommission.state == "success", {t: xcom(decommission, t) for t in ("preflight", "drain")}
        after = apply_changes(three, operator_state(CHANGES_VARIABLE, "[]"))
        assert sorted(after.clusters) == ["c1", "c2", "c3"]
        _levels(build_level_dags(after), after, 1, levels=[1, 3, 1])
        assert_exactly_once(kafka, ["c1", "c2", "c3"], topic, expected)

    out, err = capfd.readouterr()
    assert "spark_submit" in caplog.text + out + err and "Spark Connect server" in caplog.text  # both paths ran
    assert any('"audit":"mirrorflow"' in r.getMessage() for r in caplog.records)
    event_logs = "\n".join(p.read_text(errors="replace") for p in events.rglob("*") if p.is_file())
    assert event_logs, "Spark wrote no event log"
    places = {"task logs": caplog.text + out + err, "XComs": all_xcom_values(), "Spark event logs": event_logs,
              "Spark Connect server log": spark_connect_server.log_path.read_text(errors="replace"),
              "Spark standalone cluster's logs and work directories": "\n".join(
                  p.read_text(errors="replace") for p in work_dir.parent.rglob("*")
                  if p.is_file() and p.suffix not in (".zip", ".jar")),
              "process list": "\n".join(processes.text())}
    found = leaks(places, secured.password, settings["c4"]["ssl.key.pem"],
                  the_S3_secret_key=s3_bucket.secret_access_key)
    assert not found, found
