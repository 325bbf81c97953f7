"""The embedded default: four local Kafka clusters, Airflow standalone (SQLite), and a mirrored batch.

``make demo`` runs ``start``, which shows the whole product working, not just running:

1. it starts the clusters of topologies/demo.yaml on their loopback ports, a
   local S3 server (S3Proxy) with the bucket ``mirrorflow-demo`` for the
   archive (``mirror_archive``, through the Airflow connection
   ``mirrorflow_archive``), and ``airflow standalone`` with this repo's DAGs
   and plugins, and waits until the UI answers and lists the mirrorflow DAGs;
2. it creates the topic ``orders`` on every cluster and produces a fresh batch of
   uniquely identified messages on each (the values carry this start's run tag,
   so a second start on the same state adds a new batch instead of colliding);
3. it unpauses the ``mirror_level_<L>`` DAGs and triggers them through Airflow's
   REST API, lowest level first, round after round, until a whole round copies
   nothing (the tree needs several rounds for a message to reach every leaf);
4. it runs ``mirror_lag_monitor`` once (and unpauses it: it measures every
   minute), so the Mirror page (``/plugin/mirror`` in the UI) shows every link's lag;
5. it reads ``orders`` back from every cluster (read_committed, up to the last
   stable offsets) and prints a per-cluster table; it exits non-zero unless
   every cluster holds every message exactly once.

Everything runs detached and keeps its state and logs under ``.run/demo/``.
``make stop`` (``stop``) ends it all.

``MIRRORFLOW_SECURED=1`` runs the same demo on secured clusters (their own data in
``.run/demo/kafka-secured/``): SASL_SSL with SCRAM-SHA-512 on the topology's ports,
mutual TLS on a second port, and the standard authorizer refusing whatever no ACL
allows. mirrorflow logs in as the SCRAM user ``mirrorflow`` (its password generated
once, kept in a 0600 file, never printed) through the Airflow connections
``kafka_<cluster>`` (``AIRFLOW_CONN_*`` variables of ``airflow standalone``), named by a
topology generated from the demo's, with ``conn_id`` instead of ``bootstrap``; it
holds exactly the ACLs ``python -m mirrorflow.acls`` derives for that topology. The
demo's own topic, traffic and check use the harness's super user (a certificate).
One mode runs at a time: a start refuses while the other mode's demo runs.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

REPO = Path(__file__).resolve().parents[1]
# Overridable so the end-to-end test can run a second, isolated demo beside yours.
RUN = Path(os.environ.get("MIRRORFLOW_DEMO_RUN_DIR", REPO / ".run" / "demo"))
# MIRRORFLOW_SECURED=1: the secured demo, on clusters of its own (their data is formatted for one mode).
SECURED = os.environ.get("MIRRORFLOW_SECURED", "").strip().lower() in ("1", "true", "yes", "on")
MODE = "secured" if SECURED else "plaintext"
PLAIN_KAFKA_RUN = RUN / "kafka"
SECURED_KAFKA_RUN = RUN / "kafka-secured"
KAFKA_RUN = SECURED_KAFKA_RUN if SECURED else PLAIN_KAFKA_RUN
AIRFLOW_HOME = RUN / "airflow"
# The S3 server: its config, log, pid and secret here, its buckets under data/.
S3_RUN = RUN / "s3"
S3_PORT = int(os.environ.get("MIRRORFLOW_DEMO_S3_PORT", "19100"))
S3_ACCESS_KEY = "mirrorflow-demo"
S3_BUCKET = "mirrorflow-demo"
S3_CONN_ID = "mirrorflow_archive"  # the topology's archive.conn_id (its default)
# The warm Spark: a Spark Connect server every Spark job of the demo runs on (its log and pid here).
SPARK_RUN = RUN / "spark-connect"
SPARK_CONNECT_PORT = int(os.environ.get("MIRRORFLOW_DEMO_SPARK_CONNECT_PORT", "15002"))
# MIRRORFLOW_DEMO_SPARK=submit: every Spark job a spark-submit of its own on local[*] instead.
SPARK_MODES = ("connect", "submit")
SPARK_MODE = os.environ.get("MIRRORFLOW_DEMO_SPARK", "connect").strip().lower() or "connect"
TOPOLOGY = Path(os.environ.get("MIRRORFLOW_DEMO_TOPOLOGY", REPO / "topologies" / "demo.yaml"))
# The secured demo: mirrorflow's SCRAM user, its password (0600, never printed), and the topology
# Airflow runs (TOPOLOGY with each cluster's conn_id instead of its bootstrap; no secret in it).
PRINCIPAL = "mirrorflow"
SCRAM_PASSWORD_FILE = SECURED_KAFKA_RUN / "mirrorflow.password"
SECURED_TOPOLOGY = RUN / "topology.secured.yaml"
VENV_BIN = Path(sys.executable).parent
UI_PORT = int(os.environ.get("MIRRORFLOW_DEMO_UI_PORT", "8080"))
USER = "admin"

# The sample traffic: one topic the topology selects, a fresh batch per start.
TOPIC = "orders"
TOPIC_PARTITIONS = 3
MESSAGES = int(os.environ.get("MIRRORFLOW_DEMO_MESSAGES", "200"))
KEYS = 5
RUN_HEADER = "mirrorflow.demo.run"

# Mirroring: a round is every level once; the four-cluster tree settles in three.
MAX_ROUNDS = 6
# One level run can queue behind a scheduled run, then (MIRRORFLOW_DEMO_SPARK=submit) spark-submit
# on a busy two-core machine, and retry a failed task (30 s back-off): be generous.
RUN_TIMEOUT = 900.0
_pause = threading.Event()  # never set: .wait(t) is a back-off between retries, not synchronisation

# The core (include/) and the development package (mirrorflow_dev/, at the repository root).
for _path in (REPO / "include", REPO):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from mirrorflow.archive import ArchiveLocation  # noqa: E402
from mirrorflow.topology import Topology, load_topology  # noqa: E402
from mirrorflow_dev.maven import FetchError  # noqa: E402
from mirrorflow_dev.process import (  # noqa: E402
    WaitTimeout,
    group_alive,
    leader_running,
    pid_alive,
    port_free,
    stop_group,
    wait_until,
    write_secret_file,
)
from mirrorflow_dev.s3 import DEFAULT_REGION, LocalS3, S3ServerError  # noqa: E402
from mirrorflow_dev.s3 import MAIN_CLASS as S3_MAIN_CLASS  # noqa: E402
from mirrorflow_dev.spark import CONNECT_SERVER_CLASS, ConnectServerError, LocalConnectServer  # noqa: E402


def say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def wait_for(what: str, check, timeout: float, interval: float = 1.0, on_timeout=None):
    """Poll ``check`` until it returns a truthy value; past the deadline the demo exits naming ``what``."""
    try:
        return wait_until(what, check, timeout, interval, detail=on_timeout or str)
    except WaitTimeout as exc:
        raise SystemExit(f"mirrorflow demo: {exc}") from None


def airflow_env() -> dict[str, str]:
    env = os.environ.copy()
    env.update({
        "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__API__HOST": "127.0.0.1",
        # LocalExecutor forks one worker per parallelism slot (default 32): a handful
        # is plenty for the demo on a small machine.
        "AIRFLOW__CORE__PARALLELISM": os.environ.get("AIRFLOW__CORE__PARALLELISM", "4"),
        "AIRFLOW__API__PORT": str(UI_PORT),
        # Task processes report to the API server: follow the port we chose.
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{UI_PORT}/execution/",
        # A busy two-core machine can stall the API server for tens of seconds; the default 5 s
        # makes task processes give up and die (seen in the browser test). Airflow's docs say raise it.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": os.environ.get("AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT", "60"),
        "MIRROR_TOPOLOGY": str(SECURED_TOPOLOGY if SECURED else TOPOLOGY),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # Spark binds and advertises loopback only, like everything else of the demo.
        "SPARK_LOCAL_IP": "127.0.0.1",
        # Every Spark job on the demo's Connect server, or (submit) a spark-submit each on local[*].
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark_connect", "host": "127.0.0.1", "port": SPARK_CONNECT_PORT}
            if SPARK_MODE == "connect" else {"conn_type": "spark", "host": "local[*]"}),
        # mirror_archive's S3: the demo's S3 server (an environment variable, never a command line or log).
        f"AIRFLOW_CONN_{S3_CONN_ID.upper()}": json.dumps({
            "conn_type": "aws", "login": S3_ACCESS_KEY, "password": s3_secret(),
            "extra": {"endpoint_url": demo_s3().endpoint_url, "region_name": DEFAULT_REGION, "bucket": S3_BUCKET},
        }),
    })
    if SECURED:  # mirrorflow's Kafka connections, its password included: the environment, never an argument
        env.update(kafka_connections_env(load_topology(TOPOLOGY)))
    return env


def demo_password() -> str:
    """The UI password: from MIRRORFLOW_DEMO_PASSWORD, else generated once and kept in .run/."""
    pw_file = AIRFLOW_HOME / "simple_auth_manager_passwords.json.generated"
    if pw_file.exists():
        stored = json.loads(pw_file.read_text()).get(USER)
        if stored and not os.environ.get("MIRRORFLOW_DEMO_PASSWORD"):
            return stored
    password = os.environ.get("MIRRORFLOW_DEMO_PASSWORD") or secrets.token_urlsafe(9)
    AIRFLOW_HOME.mkdir(parents=True, exist_ok=True)
    pw_file.write_text(json.dumps({USER: password}))
    pw_file.chmod(0o600)
    return password


# --------------------------------------------------------------------------- S3


def stored_secret(path: Path) -> str:
    """A secret generated once into a 0600 file (``path``) and read from it after; never printed."""
    try:
        stored = path.read_text().strip()
    except FileNotFoundError:
        stored = ""
    if not stored:
        stored = secrets.token_urlsafe(24)
        write_secret_file(path, stored + "\n")
    return stored


def s3_secret() -> str:
    """The S3 server's secret key: generated once, kept in a 0600 file of the run dir, never printed."""
    return stored_secret(S3_RUN / "secret")


def demo_s3() -> LocalS3:
    """The demo's S3 server (S3Proxy) as configured; detached: it outlives ``make demo`` until ``make stop``."""
    return LocalS3(S3_PORT, S3_RUN / "data", S3_ACCESS_KEY, s3_secret(), run_dir=S3_RUN,
                   die_with_parent=False, start_new_session=True)


def s3_pid() -> int | None:
    """The pid of the demo's S3 server if it runs: the pid file, checked against the process's command line.

    A recycled pid is not mistaken for it: the process must run S3Proxy with this run dir's properties.
    """
    try:
        pid = int((S3_RUN / "s3proxy.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    ours = S3_MAIN_CLASS.encode() in cmdline and str(S3_RUN / "s3proxy.properties").encode() in cmdline
    return pid if ours and pid_alive(pid) else None


def start_s3() -> None:
    """Start (or find) the S3 server and make sure the demo's bucket exists."""
    server = demo_s3()
    pid = s3_pid()
    if pid is not None:
        say(f"S3 server already running (pid {pid}) on {server.endpoint_url}")
        wait_for(f"the S3 server (pid {pid}) to answer on {server.endpoint_url}", server.ready, timeout=30,
                 on_timeout=lambda: f"is it on another port? `make stop` ends it; log: {server.log_path}")
    else:
        say(f"Starting the S3 server (S3Proxy) on {server.endpoint_url}, buckets in {server.data_dir}, "
            f"log: {server.log_path}")
        try:
            server.start(timeout=120)
        except FetchError as exc:
            raise SystemExit(f"mirrorflow demo: {exc}") from None
        except S3ServerError as exc:
            hint = "; set MIRRORFLOW_DEMO_S3_PORT to another port" if "already in use" in str(exc) else ""
            raise SystemExit(f"mirrorflow demo: the S3 server did not start: {exc}{hint}") from None
        (S3_RUN / "s3proxy.pid").write_text(f"{server.pid}\n")
    location = ArchiveLocation(bucket=S3_BUCKET, endpoint_url=server.endpoint_url, region=server.region,
                               access_key_id=server.access_key, secret_access_key=server.secret_key)
    try:
        location.client().create_bucket(Bucket=S3_BUCKET)
        say(f"S3: created bucket {S3_BUCKET}")
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise SystemExit(f"mirrorflow demo: cannot create the S3 bucket {S3_BUCKET}: {error.get('Code')}: "
                             f"{error.get('Message')}") from None
        say(f"S3: bucket {S3_BUCKET} already exists")
    except BotoCoreError as exc:
        raise SystemExit(f"mirrorflow demo: cannot create the S3 bucket {S3_BUCKET}: {exc}") from None


def stop_detached(what: str, pid: int | None, pid_file: Path, alive) -> bool:
    """TERM, then KILL, a server the demo left running in its own session (its pid is its process group).

    ``alive(pid)`` says whether it still runs. False if it does (then its pid file
    stays, for another try).
    """
    if pid is not None:
        say(f"Stopping the {what} (pid {pid})")
        stop_group(pid, ((signal.SIGTERM, 20), (signal.SIGKILL, 5)), alive=lambda: alive(pid), interval=0.2)
        if alive(pid):
            say(f"The {what} (pid {pid}) did not stop")
            return False
    pid_file.unlink(missing_ok=True)
    return True


def stop_s3() -> bool:
    """The S3 server: the JVM shuts down on TERM."""
    return stop_detached("S3 server", s3_pid(), S3_RUN / "s3proxy.pid", pid_alive)


# --------------------------------------------------------------------------- the warm Spark


def demo_connect() -> LocalConnectServer:
    """The demo's Spark Connect server (``local[N]``, this venv's Python workers); detached, like the S3 server."""
    return LocalConnectServer(SPARK_CONNECT_PORT, run_dir=SPARK_RUN, die_with_parent=False, start_new_session=True)


def connect_pid() -> int | None:
    """The pid of the demo's Connect server if it runs: the pid file, checked against the process itself.

    A recycled pid is not mistaken for it: the process must run the Connect server's
    class from this run dir.
    """
    try:
        pid = int((SPARK_RUN / "connect-server.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except (OSError, ValueError):
        return None
    ours = CONNECT_SERVER_CLASS.encode() in cmdline and cwd == SPARK_RUN.resolve()
    return pid if ours and pid_alive(pid) else None


def start_connect(server: LocalConnectServer, runs_on: str, who: str = "demo",
                  port_variable: str = "MIRRORFLOW_DEMO_SPARK_CONNECT_PORT") -> None:
    """Start (or find, by its pid file) the Connect server every Spark job runs on; ``runs_on`` says where."""
    pid = connect_pid()
    if pid is not None:
        say(f"Spark Connect server already running (pid {pid}) on {server.url}")
        return
    say(f"Starting the Spark Connect server on {server.url} ({runs_on}); every Spark job of the {who} runs on it; "
        f"log: {server.log_path}")
    try:
        server.start(timeout=180)
    except ConnectServerError as exc:
        hint = f"; set {port_variable} to another port" if "in use" in str(exc) else ""
        raise SystemExit(f"mirrorflow {who}: {exc}{hint}") from None
    (SPARK_RUN / "connect-server.pid").write_text(f"{server.pid}\n")


def start_spark() -> None:
    """Start (or find) the Spark Connect server the demo's jobs run on; nothing in submit mode."""
    if SPARK_MODE == "submit":
        say("Spark: every job a spark-submit of its own on local[*] (MIRRORFLOW_DEMO_SPARK=submit)")
        return
    server = demo_connect()
    start_connect(server, f"local[{server.cores}]")


def stop_spark() -> bool:
    """The Connect server: Spark stops its session and Python workers on TERM; the group counts, workers included."""
    return stop_detached("Spark Connect server", connect_pid(), SPARK_RUN / "connect-server.pid", group_alive)


# --------------------------------------------------------------------------- Kafka and Airflow


def kafka_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorflow_dev.kafka", *args], cwd=REPO, text=True)


def start_kafka() -> None:
    topology = load_topology(TOPOLOGY)
    specs = []
    for name, cluster in topology.clusters.items():
        port = cluster.bootstrap.rsplit(":", 1)[1]
        specs += ["--cluster", f"{name}={port}"]
    if SECURED:
        specs.append("--secured")
        say(f"Starting {len(topology.clusters)} secured Kafka clusters ({', '.join(topology.clusters)}) from "
            f"{TOPOLOGY}: SASL_SSL (SCRAM-SHA-512) on its ports, mutual TLS on a second port, ACLs enforced")
    else:
        say(f"Starting {len(topology.clusters)} Kafka clusters ({', '.join(topology.clusters)}) from {TOPOLOGY}")
    if kafka_cli("start", "--run-dir", str(KAFKA_RUN), *specs).returncode != 0:
        raise SystemExit(f"mirrorflow demo: Kafka did not start; broker logs are under {KAFKA_RUN}")


# --------------------------------------------------------------------------- the secured demo (MIRRORFLOW_SECURED=1)


def kafka_conn_id(cluster: str) -> str:
    """The Airflow connection through which mirrorflow reaches ``cluster`` in the secured demo."""
    return f"kafka_{cluster}"


def scram_password() -> str:
    """mirrorflow's SCRAM password: generated once, kept in a 0600 file of the run dir, never printed."""
    return stored_secret(SCRAM_PASSWORD_FILE)


def secured_kafka():
    """The secured clusters as the harness recorded them (ports, CA, the admin certificate)."""
    from mirrorflow_dev.kafka import LocalKafka

    return LocalKafka.open(SECURED_KAFKA_RUN)


def mirrorflow_settings(topology: Topology) -> dict[str, dict]:
    """The librdkafka settings of mirrorflow's connection to each cluster: SCRAM-SHA-512 over TLS, the CA inline."""
    from mirrorflow_dev.secured import scram_config

    ca_pem = (SECURED_KAFKA_RUN / "pki" / "ca.pem").read_text()
    password = scram_password()
    return {name: scram_config(cluster.bootstrap, ca_pem, PRINCIPAL, password)
            for name, cluster in topology.clusters.items()}


def kafka_connections_env(topology: Topology) -> dict[str, str]:
    """``AIRFLOW_CONN_KAFKA_<CLUSTER>``: Kafka connections whose extra is mirrorflow's settings."""
    return {f"AIRFLOW_CONN_{kafka_conn_id(name).upper()}": json.dumps({"conn_type": "kafka", "extra": settings})
            for name, settings in mirrorflow_settings(topology).items()}


def write_secured_topology() -> Topology:
    """TOPOLOGY with each cluster's ``conn_id`` instead of its bootstrap, into the run dir (no secret in it)."""
    import yaml

    raw = yaml.safe_load(TOPOLOGY.read_text())
    for name, cluster in raw["clusters"].items():
        cluster.pop("bootstrap", None)
        cluster["conn_id"] = kafka_conn_id(name)
    partial = SECURED_TOPOLOGY.with_suffix(".partial")
    partial.write_text(
        f"# Generated by scripts/demo.py from {TOPOLOGY} for the secured demo (MIRRORFLOW_SECURED=1):\n"
        "# each cluster is the Airflow connection kafka_<cluster> (an AIRFLOW_CONN_* variable of airflow\n"
        "# standalone: SASL_SSL, SCRAM-SHA-512 as User:mirrorflow, the CA inline). Rewritten on every start.\n"
        + yaml.safe_dump(raw, sort_keys=False))
    os.replace(partial, SECURED_TOPOLOGY)  # a running dag-processor never reads half a file
    return load_topology(SECURED_TOPOLOGY)


def sync_acls(client: dict, principal: str, wanted: list) -> tuple[int, int]:
    """Make ``principal``'s ACLs on one cluster exactly ``wanted``: adds the missing, removes the rest.

    Returns (added, removed). A second start keeps what is still right, so a level run
    that happens to be running meanwhile is never left without a grant it needs.
    """
    from confluent_kafka.admin import AclBindingFilter

    from mirrorflow_dev.secured import acl_key, create_acls, delete_acls, held_acls

    held = held_acls(client, principal)
    want = {acl_key(b): b for b in wanted}
    extra = [AclBindingFilter(*key) for key in held.keys() - want.keys()]
    removed = delete_acls(client, extra)
    create_acls(client, [b for key, b in want.items() if key not in held])
    return len(want.keys() - held.keys()), removed


def set_up_principal() -> None:
    """mirrorflow's SCRAM user on every cluster, the topology Airflow runs, and exactly the derived ACLs."""
    from mirrorflow.needed_acls import principal_of, required_acls
    from mirrorflow_dev.secured import acl_bindings, upsert_scram_user

    topology = load_topology(TOPOLOGY)
    kafka = secured_kafka()
    settings = mirrorflow_settings(topology)
    for name in topology.clusters:
        upsert_scram_user(kafka[name].client_config(), PRINCIPAL, scram_password())
    say(f"SCRAM user {PRINCIPAL} on {', '.join(topology.clusters)}; its password is in {SCRAM_PASSWORD_FILE} "
        "(yours only, never printed)")
    secured = write_secured_topology()
    say(f"Airflow runs {SECURED_TOPOLOGY}: clusters by connection ("
        + ", ".join(f"{name}: {kafka_conn_id(name)}" for name in secured.clusters) + ")")
    wanted = acl_bindings(required_acls(secured, {name: principal_of(s) for name, s in settings.items()}))
    counts, added, removed = [], 0, 0
    for name in secured.clusters:
        more, fewer = sync_acls(kafka[name].client_config(), f"User:{PRINCIPAL}", wanted.get(name, []))
        counts.append(f"{name} {len(wanted.get(name, []))}")
        added, removed = added + more, removed + fewer
    say(f"ACLs of User:{PRINCIPAL}, exactly what mirrorflow.acls derives: {', '.join(counts)}. "
        f"(This start granted {added} and removed {removed} no longer derived.) See them with: "
        f"{VENV_BIN / 'python'} -m mirrorflow.acls {SECURED_TOPOLOGY} --principal User:{PRINCIPAL}")


def demo_clients(topology: Topology) -> dict[str, dict]:
    """How the demo itself (topic, sample traffic, the check) reaches each cluster.

    The bare bootstrap; on secured clusters the harness's super user (mutual TLS with
    its certificate), never mirrorflow's principal, whose ACLs stay exactly the derived ones.
    """
    if not SECURED:
        return {name: {"bootstrap.servers": cluster.bootstrap} for name, cluster in topology.clusters.items()}
    kafka = secured_kafka()
    return {name: kafka[name].client_config() for name in topology.clusters}


def running_parts(mode: str) -> list[str]:
    """What of the demo in ``mode`` runs now: its Kafka clusters, and Airflow if it was started in that mode."""
    parts = []
    kafka_run = SECURED_KAFKA_RUN if mode == "secured" else PLAIN_KAFKA_RUN
    if (kafka_run / "state.json").exists():
        from mirrorflow_dev.kafka import LocalKafka

        up = [name for name, info in LocalKafka.open(kafka_run).status().items() if info["running"]]
        if up:
            parts.append(f"Kafka {', '.join(up)}")
    pid_file = AIRFLOW_HOME / "standalone.pid"
    if pid_file.exists() and group_alive(int(pid_file.read_text())) and airflow_mode() == mode:
        parts.append("Airflow standalone")
    return parts


def airflow_mode() -> str:
    """The mode Airflow standalone was started in (its topology and connections differ)."""
    try:
        return (AIRFLOW_HOME / "standalone.mode").read_text().strip() or "plaintext"
    except FileNotFoundError:
        return "plaintext"


def airflow_spark_mode() -> str:
    """How the running Airflow standalone runs Spark jobs (``connect`` or ``submit``), as it was started."""
    try:
        return (AIRFLOW_HOME / "standalone.spark").read_text().strip() or "connect"
    except FileNotFoundError:
        return "submit"  # started before the demo had a Connect server


def refuse_other_spark_mode() -> None:
    """A running Airflow keeps the Spark connection it started with: another MIRRORFLOW_DEMO_SPARK needs a stop."""
    pid_file = AIRFLOW_HOME / "standalone.pid"
    if not (pid_file.exists() and group_alive(int(pid_file.read_text()))):
        return
    started_with = airflow_spark_mode()
    if started_with != SPARK_MODE:
        raise SystemExit(f"mirrorflow demo: Airflow runs with MIRRORFLOW_DEMO_SPARK={started_with}, and this start "
                         f"asks for {SPARK_MODE}. Stop it with `make stop`, then start again.")


def holding_our_ports(kafka_run: Path) -> list[str]:
    """The clusters of another run dir (``kafka_run``) that run now while our topology's ports are taken."""
    if kafka_run.resolve() == KAFKA_RUN.resolve() or not (kafka_run / "state.json").exists():
        return []
    from mirrorflow_dev.kafka import LocalKafka

    up = [name for name, info in LocalKafka.open(kafka_run).status().items() if info["running"]]
    taken = any(not port_free(int(c.bootstrap.rsplit(":", 1)[1])) for c in load_topology(TOPOLOGY).clusters.values())
    return up if taken else []


def refuse_platform() -> None:
    """Platform mode (make platform) runs the demo's clusters on the same ports: one of the two at a time."""
    up = holding_our_ports(REPO / ".run" / "platform" / "kafka")
    if up:
        raise SystemExit(f"mirrorflow demo: platform mode's clusters run ({', '.join(up)}) on the ports the demo "
                         "needs; stop it with `make platform-stop`, then run `make demo` again")


def refuse_other_mode() -> None:
    """One demo at a time: the other mode's clusters hold the same ports, and Airflow runs one topology."""
    other = "plaintext" if SECURED else "secured"
    running = running_parts(other)
    if running:
        ours = "MIRRORFLOW_SECURED=1 make demo" if SECURED else "make demo"
        raise SystemExit(f"mirrorflow demo: the {other} demo is running ({'; '.join(running)}), and this start "
                         f"asks for the {MODE} one. Stop it with `make stop`, then run `{ours}` again.")


def ui_healthy() -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{UI_PORT}/api/v2/monitor/health", timeout=3) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


class ApiError(Exception):
    """Airflow's REST API refused a call or could not be reached."""


def _http_json(method: str, url: str, body=None, token: str | None = None, timeout: float = 30):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, method=method, data=data, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.load(resp)


class AirflowApi:
    """The demo user's session with Airflow's REST API (v2): a JWT from /auth/token, renewed if refused.

    The API server shares two cores with Kafka, Spark and the scheduler, so a call
    that cannot connect or times out is tried again a few times before giving up.
    """

    def __init__(self, password: str, attempts: int = 5) -> None:
        self.base = f"http://127.0.0.1:{UI_PORT}"
        self.password = password
        self.attempts = attempts
        self._token: str | None = None

    def call(self, method: str, path: str, body=None, missing_ok: bool = False):
        """``method`` on ``/api/v2`` + ``path``; the decoded JSON answer, or None for a 404 if ``missing_ok``."""
        problem = ""
        for attempt in range(self.attempts):
            fresh = self._token is None
            try:
                if fresh:
                    self._token = _http_json("POST", f"{self.base}/auth/token",
                                             {"username": USER, "password": self.password})["access_token"]
                return _http_json(method, f"{self.base}/api/v2{path}", body, self._token)
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace")[:800]
                if exc.code == 404 and missing_ok:
                    return None
                if exc.code == 401 and not fresh:  # the token expired: log in again
                    self._token = None
                    continue
                raise ApiError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
            except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
                problem = str(exc)
                _pause.wait(2.0 * (attempt + 1))
        raise ApiError(f"{method} {path}: no answer after {self.attempts} attempts: {problem}")


def listed_dags(password: str) -> set[str]:
    """DAG ids the REST API shows the demo user: proves the login and the DAG parse at once."""
    try:
        answer = AirflowApi(password, attempts=1).call("GET", "/dags?dag_id_pattern=mirror_&limit=100")
        return {d["dag_id"] for d in answer["dags"]}
    except (ApiError, KeyError):
        return set()


def expected_dags() -> set[str]:
    """Every DAG id of dags/: one file per DAG, named after it, and one level DAG per level of the topology.

    The dag-processor parses the files one by one; waiting for all of them (not only
    the level DAGs) keeps the demo from reporting ready with half the DAGs missing.
    """
    single = {path.stem for path in (REPO / "dags").glob("mirror_*.py")} - {"mirror_levels"}
    return single | {f"mirror_level_{lvl}" for lvl in load_topology(TOPOLOGY).levels}


def import_errors(env) -> str:
    out = subprocess.run(["airflow", "dags", "list-import-errors", "-o", "plain"], env=env, capture_output=True,
                         text=True)
    return out.stdout.strip()


POOLS = REPO / "deploy" / "pools.json"


def import_pools(env: dict[str, str]) -> None:
    """The pools of deploy/pools.json (the operations pool): the same in the demo, platform mode and compose."""
    out = subprocess.run(["airflow", "pools", "import", str(POOLS)], env=env, capture_output=True, text=True,
                         cwd=AIRFLOW_HOME)
    if out.returncode != 0:
        raise SystemExit(f"mirrorflow demo: airflow pools import {POOLS} failed:\n{out.stderr[-3000:]}")


def start_airflow() -> str:
    """Start (or find) Airflow standalone; returns the demo user's password once the DAGs are listed."""
    env = airflow_env()
    password = demo_password()
    pid_file = AIRFLOW_HOME / "standalone.pid"
    log_file = AIRFLOW_HOME / "standalone.log"
    if pid_file.exists() and group_alive(int(pid_file.read_text())):
        say(f"Airflow standalone already running (pid {pid_file.read_text().strip()})")
    else:
        if ui_healthy():
            raise SystemExit(f"mirrorflow demo: port {UI_PORT} already answers; set MIRRORFLOW_DEMO_UI_PORT "
                             "to another port")
        say(f"Starting Airflow standalone (SQLite in {AIRFLOW_HOME}), log: {log_file}")
        with open(log_file, "ab") as log:
            proc = subprocess.Popen(["airflow", "standalone"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=AIRFLOW_HOME)
        pid_file.write_text(str(proc.pid))
        (AIRFLOW_HOME / "standalone.mode").write_text(MODE + "\n")
        (AIRFLOW_HOME / "standalone.spark").write_text(SPARK_MODE + "\n")

    def tail() -> str:
        return "last lines of the log:\n" + "\n".join(log_file.read_text(errors="replace").splitlines()[-30:])

    wait_for("the Airflow UI to answer", ui_healthy, timeout=240, interval=2, on_timeout=tail)
    import_pools(env)
    expected = expected_dags()
    wait_for(f"the DAGs {sorted(expected)} to be listed", lambda: expected <= listed_dags(password), timeout=240,
             interval=3, on_timeout=lambda: f"listed: {sorted(listed_dags(password))}\nimport errors:\n"
                                            + import_errors(env))
    dags = sorted(listed_dags(password))
    say(f"Airflow UI: http://127.0.0.1:{UI_PORT}  login: {USER} / {password}")
    say(f"mirrorflow DAGs: {', '.join(dags)}")
    return password


# --------------------------------------------------------------------------- sample traffic


def ensure_topic(name: str, client: dict) -> None:
    """Create ``orders`` on one cluster unless it exists (a second start finds it from the first)."""
    admin = AdminClient(dict(client))
    future = admin.create_topics([NewTopic(TOPIC, TOPIC_PARTITIONS, 1)], request_timeout=30)[TOPIC]
    try:
        future.result(timeout=60)
        say(f"{name}: created topic {TOPIC} ({TOPIC_PARTITIONS} partitions, replication factor 1)")
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise SystemExit(f"mirrorflow demo: {name}: cannot create topic {TOPIC}: {exc.args[0].str()}") from None
        say(f"{name}: topic {TOPIC} already exists")


def batch_tag() -> str:
    """Tells this start's messages from an earlier start's: every id of a batch carries it."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(2)


def produce_batch(origin: str, client: dict, tag: str, count: int) -> list[str]:
    """Produce ``count`` unique messages on ``origin``; returns their values, which are their ids.

    A value reads ``<origin>|<key>|<tag>-<seq>``, so any copy names where it came
    from. Every delivery report is checked: an unacknowledged message would later
    look like a mirroring loss.
    """
    producer = Producer({**client, "enable.idempotence": True, "linger.ms": 5})
    failures: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failures.append(f"{msg.value().decode()}: {err.name()}: {err.str()}")

    now_ms = int(time.time() * 1000)
    ids = []
    for seq in range(count):
        key = f"k{seq % KEYS}"
        value = f"{origin}|{key}|{tag}-{seq:05d}"
        producer.produce(TOPIC, key=key.encode(), value=value.encode(), headers=[(RUN_HEADER, tag.encode())],
                         timestamp=now_ms, on_delivery=delivered)
        producer.poll(0)
        ids.append(value)
    unacknowledged = producer.flush(120)
    if failures or unacknowledged:
        raise SystemExit(f"mirrorflow demo: {origin}: {len(failures)} messages failed, {unacknowledged} "
                         f"unacknowledged; first failures: {failures[:3]}")
    return ids


def produce_traffic(topology: Topology, tag: str) -> list[str]:
    """The topic on every cluster, then one batch per cluster; returns every id produced."""
    clients = demo_clients(topology)
    for name, client in clients.items():
        ensure_topic(name, client)
    produced = []
    for name, client in clients.items():
        produced += produce_batch(name, client, tag, MESSAGES)
        say(f"{name}: produced {MESSAGES} messages to {TOPIC} (batch {tag})")
    return produced


# --------------------------------------------------------------------------- mirroring through the REST API


def level_dag_id(level: int) -> str:
    return f"mirror_level_{level}"


def _run_path(dag_id: str, run_id: str) -> str:
    return f"/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}"


def _iso(moment: datetime) -> str:
    return urllib.parse.quote(moment.isoformat(), safe="")


def unpause(api: AirflowApi, dag_id: str) -> None:
    """New DAGs start paused; a paused DAG's triggered runs would wait forever."""
    api.call("PATCH", f"/dags/{dag_id}", {"is_paused": False})


def trigger(api: AirflowApi, dag_id: str) -> str:
    """A manual run now (Airflow 3: no logical date); returns its run id."""
    return api.call("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None, "note": "make demo"})["dag_run_id"]


def run_summary(api: AirflowApi, dag_id: str, run_id: str) -> dict | None:
    """The ``copy`` task's return value (the batch summary), or None if it has none (skipped, or died early)."""
    entry = api.call("GET", f"{_run_path(dag_id, run_id)}/taskInstances/copy/xcomEntries/return_value",
                     missing_ok=True)
    if entry is None:
        return None
    value = entry["value"]
    return json.loads(value) if isinstance(value, str) else value


def active_runs(api: AirflowApi, dag_id: str) -> list[dict]:
    return api.call("GET", f"/dags/{dag_id}/dagRuns?state=queued&state=running&limit=100")["dag_runs"]


class RunWatch:
    """Polls one of our runs and prints each change of state, and a heartbeat while it lasts.

    The DAGs also run on their schedule, one copy at a time, so our run may first
    queue or wait behind a scheduled one; the watch names it.
    """

    def __init__(self, api: AirflowApi, dag_id: str, run_id: str) -> None:
        self.api, self.dag_id, self.run_id = api, dag_id, run_id
        self.started = self.last_print = time.monotonic()
        self.state: str | None = None

    def ended(self) -> str | None:
        state = self.api.call("GET", _run_path(self.dag_id, self.run_id))["state"]
        elapsed = time.monotonic() - self.started
        if state != self.state:
            ahead = [r["dag_run_id"] for r in active_runs(self.api, self.dag_id)
                     if r["dag_run_id"] != self.run_id and r["state"] == "running"] if state == "queued" else []
            say(f"  {self.dag_id} {self.run_id}: {state} after {elapsed:.0f}s"
                + (f" (behind {', '.join(ahead)})" if ahead else ""))
            self.state, self.last_print = state, time.monotonic()
        elif time.monotonic() - self.last_print >= 30:
            say(f"  {self.dag_id} {self.run_id}: still {state} after {elapsed:.0f}s")
            self.last_print = time.monotonic()
        return state if state in ("success", "failed") else None


def run_level(api: AirflowApi, dag_id: str) -> tuple[str, int]:
    """Trigger one level run and wait for it; exits naming every error if it fails. Returns (run id, copied)."""
    run_id = trigger(api, dag_id)
    watch = RunWatch(api, dag_id, run_id)
    state = wait_for(f"{dag_id} run {run_id} to end", watch.ended, timeout=RUN_TIMEOUT, interval=2)
    summary = run_summary(api, dag_id, run_id)
    if state != "success":
        errors = (summary or {}).get("errors") or ["no summary: the run failed before copying; task logs are under "
                                                  f"{AIRFLOW_HOME / 'logs' / f'dag_id={dag_id}'}"]
        raise SystemExit(f"mirrorflow demo: {dag_id} run {run_id} failed:\n  " + "\n  ".join(errors))
    copied = summary["copied"] if summary else 0
    say(f"  {dag_id} {run_id}: copied {copied}" + ("" if summary else " (no copy summary: skipped)"))
    return run_id, copied


def scheduled_activity(api: AirflowApi, dag_ids: list[str], since: datetime, accounted: set,
                       round_start: datetime) -> tuple[int, list[str]]:
    """What runs we did not trigger did: copies by those that ended since ``since``, and those still active.

    A scheduled run that copies between our runs makes new work for the other
    levels, so its copies count in the round, and a round with one still active
    that started before the round cannot be the quiet one: it may be copying what
    the round did not see. One that started during the round saw no more than the
    round's own runs (a short schedule always has one going).
    """
    copied, active = 0, []
    for dag_id in dag_ids:
        ended = api.call("GET", f"/dags/{dag_id}/dagRuns?end_date_gte={_iso(since)}&limit=100")["dag_runs"]
        for run in ended:
            key = (dag_id, run["dag_run_id"])
            if key in accounted or run["state"] not in ("success", "failed"):
                continue
            accounted.add(key)
            summary = run_summary(api, dag_id, run["dag_run_id"]) or {}
            copied += summary.get("copied", 0)
            say(f"  {dag_id} {run['dag_run_id']} (not ours): {run['state']}, copied {summary.get('copied', 0)}"
                + "".join(f"\n    error: {e}" for e in summary.get("errors", [])))
        active += [f"{dag_id} {r['dag_run_id']}" for r in active_runs(api, dag_id)
                   if r.get("start_date") and datetime.fromisoformat(r["start_date"]) < round_start]
    return copied, active


def mirror_until_quiet(api: AirflowApi, levels: list[int]) -> None:
    """Every level, lowest first, round after round, until one whole round copies nothing.

    A message needs several rounds to reach every leaf (within its pair at level 1,
    across at level 3, then within the other pair), so only a round in which no
    run copied anything shows the tree has settled.
    """
    dag_ids = [level_dag_id(level) for level in sorted(levels)]
    for dag_id in dag_ids:
        unpause(api, dag_id)
    say(f"Unpaused {', '.join(dag_ids)}; mirroring round after round until a round copies nothing")
    since = datetime.now(UTC)
    accounted: set[tuple[str, str]] = set()
    for round_no in range(1, MAX_ROUNDS + 1):
        say(f"Round {round_no}")
        round_start = datetime.now(UTC)
        copied = 0
        for dag_id in dag_ids:
            run_id, run_copied = run_level(api, dag_id)
            accounted.add((dag_id, run_id))
            copied += run_copied
        others, active = scheduled_activity(api, dag_ids, since, accounted, round_start)
        copied += others
        say(f"Round {round_no}: {copied} messages copied"
            + (f"; still active: {', '.join(active)}" if active else ""))
        if copied == 0 and not active:
            return
    raise SystemExit(f"mirrorflow demo: still copying after {MAX_ROUNDS} rounds")


LAG_DAG = "mirror_lag_monitor"
#: The "Mirror" page inside the Airflow UI (plugins/mirrorflow_airflow/ui; docs/status.md).
PAGE_PATH = "/plugin/mirror"


def measure_lag(api: AirflowApi) -> None:
    """One ``mirror_lag_monitor`` run now, so the Mirror page shows every link's lag; then it runs every minute."""
    unpause(api, LAG_DAG)
    run_id = trigger(api, LAG_DAG)
    state = wait_for(f"{LAG_DAG} run {run_id} to end", RunWatch(api, LAG_DAG, run_id).ended, timeout=RUN_TIMEOUT,
                     interval=2)
    say(f"Lag measured ({LAG_DAG} {run_id}: {state}); it measures every minute from now on")


# --------------------------------------------------------------------------- the check


def stable_ends(admin: AdminClient, tps: list[TopicPartition], timeout: float = 60.0) -> list[int]:
    """Each partition's last stable offset, once it has caught up with the high watermark.

    A committed transaction's markers reach the partitions just after the commit
    returns; waiting for LSO == high watermark (with a deadline) lets them land.
    If it never does (a transaction left open), the LSO still bounds what is committed.
    """
    deadline = time.monotonic() + timeout
    while True:
        lso = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps},
                                 isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=15)
        hwm = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps},
                                 isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=15)
        lso_v = [lso[tp].result().offset for tp in tps]
        hwm_v = [hwm[tp].result().offset for tp in tps]
        if lso_v == hwm_v:
            return lso_v
        if time.monotonic() > deadline:
            say(f"  note: last stable offsets {lso_v} below high watermarks {hwm_v}: an open transaction")
            return lso_v
        _pause.wait(0.1)


def read_topic(name: str, client: dict, timeout: float = 180.0) -> list[str]:
    """Every committed value of ``orders`` on one cluster, read_committed up to the last stable offsets.

    ``enable.partition.eof`` marks a partition done when its last offsets are
    transaction markers rather than messages.
    """
    admin = AdminClient(dict(client))
    meta = admin.list_topics(topic=TOPIC, timeout=30).topics.get(TOPIC)
    if meta is None or meta.error is not None:
        raise SystemExit(f"mirrorflow demo: {name}: topic {TOPIC} is missing")
    tps = [TopicPartition(TOPIC, p) for p in sorted(meta.partitions)]
    ends = dict(zip((tp.partition for tp in tps), stable_ends(admin, tps)))
    consumer = Consumer({**client, "group.id": "mirrorflow-demo-check",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in ends])
    done = {p for p, end in ends.items() if end == 0}
    values: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(done) < len(ends):
            if time.monotonic() > deadline:
                raise SystemExit(f"mirrorflow demo: {name}: read {len(values)} messages of {TOPIC} in "
                                 f"{timeout:.0f}s; partitions not finished: {sorted(set(ends) - done)}")
            for msg in consumer.consume(500, timeout=0.05):  # a partial batch waits the whole timeout
                p = msg.partition()
                if p not in ends:  # a client-level event (e.g. a transient connection error)
                    continue
                if msg.error() is None:
                    if msg.offset() < ends[p]:
                        values.append(msg.value().decode(errors="replace"))
                    next_offset = msg.offset() + 1
                else:  # partition EOF: its offset is where the partition ends
                    next_offset = msg.offset()
                if next_offset >= ends[p]:
                    done.add(p)
    finally:
        consumer.close()
    return values


def origin_of(value: str) -> str:
    return value.split("|", 1)[0]


def print_table(header: list[str], rows: list[list]) -> None:
    """A plain ``|``-separated table: readable, and parsed by the end-to-end test."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]

    def line(cells) -> str:
        return " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(line(row))
    sys.stdout.flush()


def report(topology: Topology, produced: list[str], tag: str) -> bool:
    """Print the per-cluster table; True if every cluster holds every message exactly once.

    "Every message" is this batch plus whatever earlier starts produced: the union
    of what any cluster holds and what this start produced, so a second start on
    the same state checks the old batches too.
    """
    say(f"Reading {TOPIC} back from every cluster (read_committed, up to the last stable offsets)")
    held = {name: Counter(read_topic(name, client)) for name, client in demo_clients(topology).items()}
    expected = set(produced).union(*held.values())
    say(f"Expected on every cluster: {len(expected)} messages ({len(produced)} from this start, batch {tag}; "
        f"{len(expected) - len(produced)} from earlier starts)")
    origins = list(topology.clusters) + sorted({origin_of(v) for v in expected} - set(topology.clusters))
    header = ["cluster", "messages", "distinct", "duplicates", "missing"] + [f"from {o}" for o in origins]
    rows, bad = [], []
    for name, counts in held.items():
        total, distinct = sum(counts.values()), len(counts)
        missing = len(expected - set(counts))
        per_origin = Counter(origin_of(v) for v in counts.elements())
        rows.append([name, total, distinct, total - distinct, missing] + [per_origin[o] for o in origins])
        if total != distinct or missing:
            bad.append(f"{name} has {total - distinct} duplicates and misses {missing}")
    print_table(header, rows)
    if bad:
        say(f"Result: NOT exactly once: {'; '.join(bad)}")
        return False
    say(f"Result: every cluster holds every message exactly once ({len(expected)} messages on each of "
        f"{', '.join(held)})")
    return True


def run_demo(password: str) -> None:
    """Sample traffic on every cluster, mirrored by the level DAGs, then checked on every cluster."""
    topology = load_topology(TOPOLOGY)
    tag = batch_tag()
    produced = produce_traffic(topology, tag)
    started = time.monotonic()
    try:
        mirror_until_quiet(AirflowApi(password), topology.levels)
    except ApiError as exc:
        raise SystemExit(f"mirrorflow demo: Airflow's REST API: {exc}") from None
    say(f"Mirroring settled in {time.monotonic() - started:.0f}s")
    measure_lag(AirflowApi(password))
    if not report(topology, produced, tag):
        raise SystemExit("mirrorflow demo: the clusters do not all hold every message exactly once "
                         f"(the demo is left running for a look; logs under {RUN}; make stop ends it)")


# --------------------------------------------------------------------------- stop


def stop() -> None:
    pid_file = AIRFLOW_HOME / "standalone.pid"
    if pid_file.exists():
        pgid = int(pid_file.read_text())
        if group_alive(pgid):
            say(f"Stopping Airflow standalone (process group {pgid})")
            # Ctrl-C first (standalone stops its components on it), then TERM, then KILL the rest.
            stop_group(pgid, ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 5)),
                       first_done=lambda: not leader_running(pgid))
        pid_file.unlink()
    (AIRFLOW_HOME / "standalone.mode").unlink(missing_ok=True)
    (AIRFLOW_HOME / "standalone.spark").unlink(missing_ok=True)
    spark_stopped = stop_spark()
    s3_stopped = stop_s3()
    for kafka_run, which in ((PLAIN_KAFKA_RUN, "Kafka clusters"), (SECURED_KAFKA_RUN, "secured Kafka clusters")):
        if kafka_run.exists():
            say(f"Stopping the {which}")
            kafka_cli("stop", "--run-dir", str(kafka_run))
    if not s3_stopped:
        raise SystemExit("mirrorflow demo: the S3 server outlived stop; run it again")
    if not spark_stopped:
        raise SystemExit("mirrorflow demo: the Spark Connect server outlived stop; run it again")
    say(f"Stopped. State and logs stay in {RUN} (delete it for a clean slate).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    args = parser.parse_args()
    if args.action == "stop":
        stop()
        return
    if SPARK_MODE not in SPARK_MODES:
        raise SystemExit(f"mirrorflow demo: MIRRORFLOW_DEMO_SPARK={SPARK_MODE!r}: expected one of "
                         f"{', '.join(SPARK_MODES)} (connect, the default: every Spark job on one Connect server)")
    RUN.mkdir(parents=True, exist_ok=True)
    refuse_platform()
    refuse_other_mode()
    refuse_other_spark_mode()
    start_kafka()
    if SECURED:
        set_up_principal()
    start_s3()
    start_spark()
    password = start_airflow()
    run_demo(password)
    say(f"S3 (mirror_archive, connection {S3_CONN_ID}): {demo_s3().endpoint_url} bucket {S3_BUCKET}, "
        f"access key {S3_ACCESS_KEY}, secret in {S3_RUN / 'secret'}")
    if SPARK_MODE == "connect":
        say(f"Spark (connection spark_default): the Connect server on {demo_connect().url}, log in "
            f"{demo_connect().log_path}")
    if SECURED:
        pki = SECURED_KAFKA_RUN / "pki"
        say(f"Kafka (secured): mirrorflow logs in as User:{PRINCIPAL} (SASL_SSL, SCRAM-SHA-512) through the "
            f"connections kafka_<cluster>; password in {SCRAM_PASSWORD_FILE}, CA {pki / 'ca.pem'}; "
            f"the demo's own admin logs in by certificate ({pki / 'admin.pem'})")
    say(f"Demo running: UI http://127.0.0.1:{UI_PORT} (login {USER} / {password}); Mirror page "
        f"http://127.0.0.1:{UI_PORT}{PAGE_PATH}. Stop it with: make stop")


if __name__ == "__main__":
    main()
