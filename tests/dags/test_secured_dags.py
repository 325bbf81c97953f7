"""The DAGs on secured clusters, credentials only in Airflow connections, and no secret anywhere it could leak.

Four secured clusters (tests.fixtures.secured): c1..c3 reached over SASL_SSL/SCRAM,
c4 over mutual TLS with its certificate and key inline (PEM), every cluster named by
an ``AIRFLOW_CONN_*`` connection. The principal holds exactly the ACLs
``mirrorflow.acls`` derives for the roles source and target. The level DAGs copy
with ``spark-submit`` on ``local[*]`` (Spark's event log on). Every other role, on the
Spark Connect path, is tests/dags/test_secured_operations.py.

While they run, a sampler reads every process's command line. Afterwards the test
searches everything a secret could reach for the password and the private key:
the task logs (what ``dag.test()`` prints and logs), the audit lines, every XCom,
Spark's event logs and the process list.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest

from mirrorflow.acls import principal_of, required_acls
from mirrorflow.topology import Topology
from tests.dags.test_level_dags import xcom
from tests.fixtures.secured import connections_env
from tests.integration.mirroring import FOUR, assert_exactly_once, traffic

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]


class ProcessList:
    """Every command line seen on the machine while it runs (a thread reading /proc, paced by an event)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in Path("/proc").iterdir():
                if proc.name.isdigit():
                    try:
                        self.seen.add((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
                    except OSError:
                        pass
            self._stop.wait(0.05)

    def __enter__(self) -> ProcessList:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def all_xcom_values() -> str:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return "\n".join(json.dumps(XComModel.deserialize_value(row), default=str)
                         for row in session.query(XComModel).all())


def leaks(places: dict[str, str], password: str, key_pem: str) -> list[str]:
    """Where the password or any line of the private key shows up in ``places`` (name -> text)."""
    key_body = [line for line in key_pem.splitlines() if line and "-----" not in line]
    secrets = {"the SCRAM password": password, **{f"the private key (line {i})": line
                                                  for i, line in enumerate(key_body)}}
    return [f"{what} in the {where}" for where, text in places.items() for what, secret in secrets.items()
            if secret in text]


def test_dags_converge_on_secured_clusters_and_no_secret_leaks(airflow_home, mirrorflow_acls, monkeypatch, tmp_path,
                                                               caplog, capfd):
    from mirrorflow_airflow.factories.levels import build_level_dags

    secured = mirrorflow_acls
    settings = {name: secured.scram(name) for name in ("c1", "c2", "c3")}
    settings["c4"] = secured.mtls("c4")
    conn_ids = {name: f"mf_sec_{name}_{uuid.uuid4().hex[:4]}" for name in settings}
    for key, value in connections_env({conn_ids[n]: s for n, s in settings.items()}).items():
        monkeypatch.setenv(key, value)
    topic = f"sec{uuid.uuid4().hex[:6]}.orders"
    topology = Topology.parse({"clusters": {n: {"conn_id": conn_ids[n]} for n in settings},
                               "tree": __import__("yaml").safe_load(FOUR), "topics": [topic]})
    secured.grant_acls(required_acls(topology, {n: principal_of(s) for n, s in settings.items()},
                                     roles=["source", "target"]))
    # Spark's event log, where a secret in Spark's configuration would show
    events = tmp_path / "spark-events"
    events.mkdir()
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))

    from confluent_kafka.admin import AdminClient, NewTopic
    for origin in ("c1", "c3"):
        admin = AdminClient(secured.admin(origin))
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    ids = [i for origin in ("c1", "c3") for i in traffic(secured.kafka, origin, topic, 20)]

    dags = build_level_dags(topology)
    with ProcessList() as processes:
        for _ in range(2):  # pairs, across, pairs again, across (finds nothing left)
            for level in topology.levels:
                run = dags[f"mirror_level_{level}"].test()
                assert run.state == "success", xcom(run, "copy")
    assert_exactly_once(secured.kafka, ["c1", "c2", "c3", "c4"], topic, ids)
    assert any("org.apache.spark.deploy.SparkSubmit" in c for c in processes.seen)  # the sampler saw the jobs

    out, err = capfd.readouterr()
    event_logs = "\n".join(p.read_text(errors="replace") for p in events.rglob("*") if p.is_file())
    assert event_logs, "Spark wrote no event log"
    assert "spark_submit" in caplog.text + out + err  # the jobs ran through spark-submit
    assert any('"audit": "mirrorflow"' in r.getMessage() or '"audit":"mirrorflow"' in r.getMessage()
               for r in caplog.records)
    places = {"task logs": caplog.text + out + err, "XComs": all_xcom_values(), "Spark event logs": event_logs,
              "process list": "\n".join(processes.seen)}
    found = leaks(places, secured.password, settings["c4"]["ssl.key.pem"])
    assert not found, found
