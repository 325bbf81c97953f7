"""``MIRRORFLOW_SECURED=1 make demo``, run as a user would, in an isolated run dir and ports.

Only what the secured demo adds to tests/e2e/test_demo.py (which proves the rest:
four clusters, the S3 server, the UI, every DAG listed): the clusters refuse an
anonymous plaintext client and a TLS client without a certificate; the principal
``User:mirrorflow`` holds exactly the ACLs ``mirrorflow.acls`` derives for the
topology Airflow runs, and no other principal holds any; the demo's traffic is
mirrored exactly once by the Airflow-run level DAGs on those clusters; and the
SCRAM password, while the demo runs and after, is in no process's command line,
no file of the repository, not in the demo's output and in no file of its run
dir but the one 0600 file that keeps it. ``stop`` ends it.

To stay short it runs the demo's knobs down: one pair of clusters (the demo
topology's c1 and c2 at level 1: one level run copies, the next finds nothing)
and a few messages each (``MIRRORFLOW_DEMO_MESSAGES``).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from mirrorflow.needed_acls import required_acls
from mirrorflow.topology import load_topology
from mirrorflow_dev.kafka import LocalKafka
from mirrorflow_dev.secured import held_acls
from mirrorflow_dev.spark import CONNECT_SERVER_CLASS
from tests.e2e.demo_run import accepts, demo_env, final_table, free_ports, group_alive
from tests.fixtures.secured import bindings
from tests.processes import CommandLines

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = ("c1", "c2")
MESSAGES = 25  # per cluster
PRINCIPAL = "User:mirrorflow"

pytestmark = pytest.mark.e2e


def _pair_topology(ports: dict[str, int]) -> str:
    """The demo topology cut down to its first pair (c1, c2 at level 1), on the given ports."""
    raw = yaml.safe_load((REPO / "topologies" / "demo.yaml").read_text())
    raw["clusters"] = {name: {"bootstrap": f"127.0.0.1:{ports[name]}"} for name in CLUSTERS}
    raw["tree"] = {"level": 1, "children": list(CLUSTERS)}
    raw["schemas"]["clusters"] = {n: c for n, c in raw["schemas"]["clusters"].items() if n in CLUSTERS}
    raw["archive"]["clusters"] = [n for n in raw["archive"]["clusters"] if n in CLUSTERS]
    return yaml.safe_dump(raw, sort_keys=False)


def _refused(config: dict) -> bool:
    """True if a client with ``config`` gets no metadata (its connection is refused or dropped)."""
    admin = AdminClient({**config, "socket.connection.setup.timeout.ms": 3000, "log_level": 0})
    try:
        admin.list_topics(timeout=4)
    except KafkaException:
        return True
    return False


def _acl_keys(admin_config: dict, principal: str | None) -> set[tuple]:
    """Every ACL on a cluster (of ``principal``, or of anyone), as comparable tuples."""
    return set(held_acls(admin_config, principal))


def _files_holding(root: Path, secret: bytes, paths=None) -> list[Path]:
    found = []
    for path in paths if paths is not None else root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and secret in path.read_bytes():
                found.append(path)
        except OSError:
            pass
    return found


def test_secured_demo_mirrors_with_exactly_the_derived_acls_and_keeps_its_password(tmp_path):
    k1, k2, ui, worker_logs, trigger_logs, s3, spark = free_ports(7)
    topology = tmp_path / "topology.yaml"
    topology.write_text(_pair_topology({"c1": k1, "c2": k2}))
    run = tmp_path / "run"
    env = demo_env(run, topology, MESSAGES, ui=ui, s3=s3, spark=spark, worker_logs=worker_logs,
                   trigger_logs=trigger_logs, MIRRORFLOW_SECURED="1")
    demo = [sys.executable, str(REPO / "scripts" / "demo.py")]
    ssl_ports: list[int] = []
    try:
        with CommandLines(interval=0.1) as commands:
            started = subprocess.run(demo + ["start"], env=env, capture_output=True, text=True, timeout=1500)
        assert started.returncode == 0, started.stdout[-6000:] + started.stderr[-4000:]

        # Mirrored exactly once, by the level DAG's runs: each cluster holds both batches, once.
        table = final_table(started.stdout)
        assert set(table) == set(CLUSTERS), started.stdout
        for cluster, row in table.items():
            assert row["duplicates"] == "0" and row["missing"] == "0", (cluster, row)
            assert row["messages"] == row["distinct"] == str(MESSAGES * len(CLUSTERS)), (cluster, row)
            assert all(row[f"from {origin}"] == str(MESSAGES) for origin in CLUSTERS), (cluster, row)
        copied = [line for line in started.stdout.splitlines() if line.startswith("==> Round ") and "copied" in line]
        assert copied and copied[0].endswith(f": {MESSAGES * len(CLUSTERS)} messages copied"), started.stdout

        # The clusters: an anonymous plaintext client and a TLS client without a certificate are refused.
        kafka = LocalKafka.open(run / "kafka-secured")
        assert kafka.secured and set(kafka) == set(CLUSTERS)
        ca_pem = (run / "kafka-secured" / "pki" / "ca.pem").read_text()
        ssl_ports += [kafka[name].security.ssl_port for name in CLUSTERS]
        strangers = {f"{name}: a plaintext client": {"bootstrap.servers": kafka[name].bootstrap} for name in CLUSTERS}
        strangers.update({f"{name}: a TLS client without a certificate": {
            "bootstrap.servers": kafka[name].ssl_bootstrap, "security.protocol": "SSL", "ssl.ca.pem": ca_pem}
            for name in CLUSTERS})
        with ThreadPoolExecutor(len(strangers)) as pool:
            let_in = [who for who, refused in zip(strangers, pool.map(_refused, strangers.values())) if not refused]
        assert not let_in, f"let in: {let_in}"

        # The ACLs: exactly the derived ones, for mirrorflow's principal, and nobody else holds any.
        secured_topology = load_topology(run / "topology.secured.yaml")
        assert {n: c.conn_id for n, c in secured_topology.clusters.items()} == {n: f"kafka_{n}" for n in CLUSTERS}
        wanted = bindings(required_acls(secured_topology, {n: PRINCIPAL for n in CLUSTERS}))
        for name in CLUSTERS:
            expected = {(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                         b.permission_type) for b in wanted[name]}
            assert expected and _acl_keys(kafka[name].client_config(), None) == expected, name
        counts = ", ".join(f"{n} {len(wanted[n])}" for n in CLUSTERS)
        assert f"ACLs of {PRINCIPAL}, exactly what mirrorflow.acls derives: {counts}." in started.stdout

        # The password: one 0600 file; nowhere else (command lines, the repository, the output, the run dir).
        password_file = run / "kafka-secured" / "mirrorflow.password"
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        password = password_file.read_text().strip()
        assert len(password) >= 24
        secret = password.encode()
        assert any(b"airflow" in c and b"standalone" in c for c in commands.seen)  # the sampler saw the demo
        # and the Connect server the level runs ran on, with its Python workers (they held the job's settings)
        assert any(CONNECT_SERVER_CLASS.encode() in c for c in commands.seen)
        assert any(b"pyspark.daemon" in c for c in commands.seen)
        # (a failure names where, never the password itself: a command line shows only its program)
        in_commands = [b" ".join(c.split(b"\0")[:2]).decode(errors="replace") for c in commands.seen if secret in c]
        assert not in_commands, f"the SCRAM password is in the command line of: {in_commands}"
        in_output = [name for name, text in (("stdout", started.stdout), ("stderr", started.stderr))
                     if password in text]
        assert not in_output, f"the SCRAM password is in the demo's {' and '.join(in_output)}"
        tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                                 capture_output=True, check=True).stdout.split(b"\0")
        in_repo = _files_holding(REPO, secret, [REPO / os.fsdecode(p) for p in tracked if p])
        assert not in_repo, f"the SCRAM password is in repository files: {in_repo}"
        assert _files_holding(run, secret) == [password_file]
        conn = json.loads(next(v for k, v in _airflow_environ(run).items() if k == "AIRFLOW_CONN_KAFKA_C1"))
        assert conn["extra"]["sasl.username"] == "mirrorflow"
        assert conn["extra"]["sasl.password"] == password, "the connection's password is not the kept one"
    finally:
        pid_file = run / "airflow" / "standalone.pid"
        pgid = int(pid_file.read_text()) if pid_file.exists() else None
        stopped = subprocess.run(demo + ["stop"], env=env, capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not any(accepts(p) for p in (k1, k2, ui, s3, spark, *ssl_ports))
    assert pgid is not None and not group_alive(pgid), "processes of Airflow standalone outlived stop"


def _airflow_environ(run: Path) -> dict[str, str]:
    """The environment of the running ``airflow standalone`` (where the connections, password included, belong)."""
    pid = int((run / "airflow" / "standalone.pid").read_text())
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.decode(errors="replace").split("=", 1) for item in raw.split(b"\0") if b"=" in item)
