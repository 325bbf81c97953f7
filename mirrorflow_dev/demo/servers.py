"""The demo's servers besides Airflow: its Kafka clusters, the S3 server and the Spark Connect server.

Each runs detached, in a session of its own, and outlives ``make demo`` until
``make stop``; a second start finds it by its pid file, checked against the
process itself, so a recycled pid is never mistaken for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.topology import load_topology
from mirrorflow_dev.demo.settings import REPO, S3_ACCESS_KEY, S3_BUCKET, DemoSettings, say, wait_for
from mirrorflow_dev.maven import FetchError
from mirrorflow_dev.process import group_alive, pid_alive, port_free, stop_group, stored_secret
from mirrorflow_dev.s3 import MAIN_CLASS as S3_MAIN_CLASS
from mirrorflow_dev.s3 import LocalS3, S3ServerError
from mirrorflow_dev.spark import CONNECT_SERVER_CLASS, ConnectServerError, LocalConnectServer

# --------------------------------------------------------------------------- Kafka


def kafka_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorflow_dev.kafka", *args], cwd=REPO, text=True)


def start_kafka(demo: DemoSettings) -> None:
    """The topology's clusters on their ports (secured: SASL_SSL, mutual TLS, ACLs enforced)."""
    topology = load_topology(demo.topology)
    specs = []
    for name, cluster in topology.clusters.items():
        port = cluster.bootstrap.rsplit(":", 1)[1]
        specs += ["--cluster", f"{name}={port}"]
    if demo.secured:
        specs.append("--secured")
        say(f"Starting {len(topology.clusters)} secured Kafka clusters ({', '.join(topology.clusters)}) from "
            f"{demo.topology}: SASL_SSL (SCRAM-SHA-512) on its ports, mutual TLS on a second port, ACLs enforced")
    else:
        say(f"Starting {len(topology.clusters)} Kafka clusters ({', '.join(topology.clusters)}) from {demo.topology}")
    if kafka_cli("start", "--run-dir", str(demo.kafka_run), *specs).returncode != 0:
        raise SystemExit(f"mirrorflow demo: Kafka did not start; broker logs are under {demo.kafka_run}")


def stop_kafka(kafka_run: Path, which: str = "Kafka clusters") -> None:
    if kafka_run.exists():
        say(f"Stopping the {which}")
        kafka_cli("stop", "--run-dir", str(kafka_run))


def running_clusters(kafka_run: Path) -> list[str]:
    """The clusters of ``kafka_run`` that run now."""
    if not (kafka_run / "state.json").exists():
        return []
    from mirrorflow_dev.kafka import LocalKafka

    return [name for name, info in LocalKafka.open(kafka_run).status().items() if info["running"]]


def holding_our_ports(demo: DemoSettings, kafka_run: Path) -> list[str]:
    """The clusters of another run dir (``kafka_run``) that run now while our topology's ports are taken."""
    if kafka_run.resolve() == demo.kafka_run.resolve():
        return []
    up = running_clusters(kafka_run)
    if not up:
        return []
    clusters = load_topology(demo.topology).clusters.values()
    taken = any(not port_free(int(c.bootstrap.rsplit(":", 1)[1])) for c in clusters)
    return up if taken else []


# --------------------------------------------------------------------------- detached servers


def pid_from(pid_file: Path, ours: Callable[[int, list[bytes]], bool]) -> int | None:
    """The pid in ``pid_file`` if that process runs and ``ours(pid, its command line)`` says it is ours."""
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        mine = ours(pid, cmdline)
    except (OSError, ValueError):
        return None
    return pid if mine and pid_alive(pid) else None


def stop_detached(what: str, pid: int | None, pid_file: Path, alive: Callable[[int], bool]) -> bool:
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


# --------------------------------------------------------------------------- S3


def s3_secret(demo: DemoSettings) -> str:
    """The S3 server's secret key: generated once, kept in a 0600 file of the run dir, never printed."""
    return stored_secret(demo.s3_run / "secret")


def demo_s3(demo: DemoSettings) -> LocalS3:
    """The demo's S3 server (S3Proxy) as configured; detached: it outlives ``make demo`` until ``make stop``."""
    return LocalS3(demo.s3_port, demo.s3_run / "data", S3_ACCESS_KEY, s3_secret(demo), run_dir=demo.s3_run,
                   die_with_parent=False, start_new_session=True)


def s3_pid(demo: DemoSettings) -> int | None:
    """The pid of the demo's S3 server if it runs: it must run S3Proxy with this run dir's properties."""
    properties = str(demo.s3_run / "s3proxy.properties").encode()
    return pid_from(demo.s3_run / "s3proxy.pid",
                    lambda pid, cmdline: S3_MAIN_CLASS.encode() in cmdline and properties in cmdline)


def start_s3(demo: DemoSettings) -> None:
    """Start (or find) the S3 server and make sure the demo's bucket exists."""
    server = demo_s3(demo)
    pid = s3_pid(demo)
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
        (demo.s3_run / "s3proxy.pid").write_text(f"{server.pid}\n")
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


def stop_s3(demo: DemoSettings) -> bool:
    """The S3 server: the JVM shuts down on TERM."""
    return stop_detached("S3 server", s3_pid(demo), demo.s3_run / "s3proxy.pid", pid_alive)


# --------------------------------------------------------------------------- the warm Spark


def demo_connect(demo: DemoSettings) -> LocalConnectServer:
    """The demo's Spark Connect server (``local[N]``, this venv's Python workers); detached, like the S3 server."""
    return LocalConnectServer(demo.spark_connect_port, run_dir=demo.spark_run, die_with_parent=False,
                              start_new_session=True)


def connect_pid(demo: DemoSettings) -> int | None:
    """The pid of the demo's Connect server if it runs: it must run the Connect server's class from this run dir."""
    run_dir = demo.spark_run.resolve()
    return pid_from(demo.spark_run / "connect-server.pid",
                    lambda pid, cmdline: CONNECT_SERVER_CLASS.encode() in cmdline
                    and Path(os.readlink(f"/proc/{pid}/cwd")) == run_dir)


def start_connect(demo: DemoSettings, server: LocalConnectServer, runs_on: str, who: str = "demo",
                  port_variable: str = "MIRRORFLOW_DEMO_SPARK_CONNECT_PORT") -> None:
    """Start (or find, by its pid file) the Connect server every Spark job runs on; ``runs_on`` says where."""
    pid = connect_pid(demo)
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
    (demo.spark_run / "connect-server.pid").write_text(f"{server.pid}\n")


def start_spark(demo: DemoSettings) -> None:
    """Start (or find) the Spark Connect server the demo's jobs run on; nothing in submit mode."""
    if demo.spark_mode == "submit":
        say("Spark: every job a spark-submit of its own on local[*] (MIRRORFLOW_DEMO_SPARK=submit)")
        return
    server = demo_connect(demo)
    start_connect(demo, server, f"local[{server.cores}]")


def stop_spark(demo: DemoSettings) -> bool:
    """The Connect server: Spark stops its session and Python workers on TERM; the group counts, workers included."""
    return stop_detached("Spark Connect server", connect_pid(demo), demo.spark_run / "connect-server.pid",
                         group_alive)
