"""The embedded default: four local Kafka clusters and Airflow standalone (SQLite).

``make demo`` runs ``start``: it starts the clusters of topologies/demo.yaml on
their loopback ports, starts ``airflow standalone`` with this repo's DAGs and
plugins, waits until the UI answers and lists the mirrorflow DAGs, and prints
where everything is. Everything runs detached and keeps its state and logs
under ``.run/demo/``. ``make stop`` (``stop``) ends it all.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Overridable so the end-to-end test can run a second, isolated demo beside yours.
RUN = Path(os.environ.get("MIRRORFLOW_DEMO_RUN_DIR", REPO / ".run" / "demo"))
KAFKA_RUN = RUN / "kafka"
AIRFLOW_HOME = RUN / "airflow"
TOPOLOGY = Path(os.environ.get("MIRRORFLOW_DEMO_TOPOLOGY", REPO / "topologies" / "demo.yaml"))
VENV_BIN = Path(sys.executable).parent
UI_PORT = int(os.environ.get("MIRRORFLOW_DEMO_UI_PORT", "8080"))
USER = "admin"

sys.path.insert(0, str(REPO / "include"))
from mirrorflow.topology import load_topology  # noqa: E402


def say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def wait_for(what: str, check, timeout: float, interval: float = 1.0, on_timeout=None):
    """Poll ``check`` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = on_timeout() if on_timeout else ""
            raise SystemExit(f"mirrorflow demo: timed out after {timeout:.0f}s waiting for {what}\n{extra}")
        time.sleep(interval)  # polling interval between condition checks, not synchronisation


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
        "MIRROR_TOPOLOGY": str(TOPOLOGY),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # The Spark provider falls back to YARN without a connection: run locally.
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
    })
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


def kafka_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirrorflow.local.kafka", *args], cwd=REPO, text=True)


def start_kafka() -> None:
    topology = load_topology(TOPOLOGY)
    specs = []
    for name, cluster in topology.clusters.items():
        port = cluster.bootstrap.rsplit(":", 1)[1]
        specs += ["--cluster", f"{name}={port}"]
    say(f"Starting {len(topology.clusters)} Kafka clusters ({', '.join(topology.clusters)}) from {TOPOLOGY}")
    if kafka_cli("start", "--run-dir", str(KAFKA_RUN), *specs).returncode != 0:
        raise SystemExit(f"mirrorflow demo: Kafka did not start; broker logs are under {KAFKA_RUN}")


def ui_healthy() -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{UI_PORT}/api/v2/monitor/health", timeout=3) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def listed_dags(password: str) -> set[str]:
    """DAG ids the REST API shows the demo user: proves the login and the DAG parse at once."""
    base = f"http://127.0.0.1:{UI_PORT}"
    try:
        req = urllib.request.Request(f"{base}/auth/token", method="POST",
                                     data=json.dumps({"username": USER, "password": password}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            token = json.load(resp)["access_token"]
        req = urllib.request.Request(f"{base}/api/v2/dags?dag_id_pattern=mirror_&limit=100",
                                     headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return {d["dag_id"] for d in json.load(resp)["dags"]}
    except (urllib.error.URLError, OSError, KeyError, json.JSONDecodeError):
        return set()


def import_errors(env) -> str:
    out = subprocess.run(["airflow", "dags", "list-import-errors", "-o", "plain"], env=env, capture_output=True, text=True)
    return out.stdout.strip()


def start_airflow() -> None:
    env = airflow_env()
    password = demo_password()
    pid_file = AIRFLOW_HOME / "standalone.pid"
    log_file = AIRFLOW_HOME / "standalone.log"
    if pid_file.exists() and _group_alive(int(pid_file.read_text())):
        say(f"Airflow standalone already running (pid {pid_file.read_text().strip()})")
    else:
        if ui_healthy():
            raise SystemExit(f"mirrorflow demo: port {UI_PORT} already answers; set MIRRORFLOW_DEMO_UI_PORT to another port")
        say(f"Starting Airflow standalone (SQLite in {AIRFLOW_HOME}), log: {log_file}")
        with open(log_file, "ab") as log:
            proc = subprocess.Popen(["airflow", "standalone"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=AIRFLOW_HOME)
        pid_file.write_text(str(proc.pid))
    tail = lambda: "last lines of the log:\n" + "\n".join(log_file.read_text(errors="replace").splitlines()[-30:])
    wait_for("the Airflow UI to answer", ui_healthy, timeout=240, interval=2, on_timeout=tail)
    expected = {f"mirror_level_{lvl}" for lvl in load_topology(TOPOLOGY).levels}
    wait_for(f"the DAGs {sorted(expected)} to be listed", lambda: expected <= listed_dags(password), timeout=180,
             interval=3, on_timeout=lambda: "import errors:\n" + import_errors(env))
    dags = sorted(listed_dags(password))
    say(f"Airflow UI: http://127.0.0.1:{UI_PORT}  login: {USER} / {password}")
    say(f"mirrorflow DAGs: {', '.join(dags)}")


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group remains (standalone's components included)."""
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


def _stop_group(pgid: int) -> None:
    """Ctrl-C first (standalone stops its components on it), then TERM, then KILL the rest."""
    for sig, grace in ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)  # polling for the exit, not synchronising on time
        if not _group_alive(pgid):
            return


def stop() -> None:
    pid_file = AIRFLOW_HOME / "standalone.pid"
    if pid_file.exists():
        pgid = int(pid_file.read_text())
        if _group_alive(pgid):
            say(f"Stopping Airflow standalone (process group {pgid})")
            _stop_group(pgid)
        pid_file.unlink()
    if KAFKA_RUN.exists():
        say("Stopping the Kafka clusters")
        kafka_cli("stop", "--run-dir", str(KAFKA_RUN))
    say(f"Stopped. State and logs stay in {RUN} (delete it for a clean slate).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    args = parser.parse_args()
    if args.action == "stop":
        stop()
        return
    RUN.mkdir(parents=True, exist_ok=True)
    start_kafka()
    start_airflow()
    say("Demo running. Stop it with: make stop")


if __name__ == "__main__":
    main()
