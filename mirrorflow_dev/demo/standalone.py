"""The demo's Airflow: ``airflow standalone`` (SQLite) with this repository's DAGs and plugins, and its environment.

:func:`airflow_env` is the environment every local Airflow of the repository
starts from (:func:`~mirrorflow_dev.demo.settings.airflow_base_env`, which
platform mode's and the test fixture's share) with the demo's connections:
Spark, the archive's S3 and, secured, mirrorflow's Kafka connections (their
secrets in the environment, never an argument or a log).

One demo runs at a time: the guards refuse a start while platform mode's
clusters, or the other mode's demo, hold the same ports.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path

from mirrorflow.topology import load_topology
from mirrorflow_dev.airflow_api import AirflowApi, healthy, listed_dags
from mirrorflow_dev.demo.secured import kafka_connections_env
from mirrorflow_dev.demo.servers import demo_s3, holding_our_ports, running_clusters, s3_secret
from mirrorflow_dev.demo.settings import (
    POOLS,
    REPO,
    S3_ACCESS_KEY,
    S3_BUCKET,
    S3_CONN_ID,
    USER,
    DemoSettings,
    airflow_base_env,
    say,
    wait_for,
)
from mirrorflow_dev.process import group_alive, leader_running, stop_group
from mirrorflow_dev.s3 import DEFAULT_REGION


def airflow_env(demo: DemoSettings) -> dict[str, str]:
    """The demo's Airflow environment: the base, its S3 connection and (secured) mirrorflow's Kafka connections."""
    env = airflow_base_env(os.environ, demo.airflow_home, demo.ui_port,
                           demo.secured_topology if demo.secured else demo.topology, f"{USER}:admin",
                           spark_connect_port=demo.spark_connect_port if demo.spark_mode == "connect" else None)
    # mirror_archive's S3: the demo's S3 server (an environment variable, never a command line or log).
    env[f"AIRFLOW_CONN_{S3_CONN_ID.upper()}"] = json.dumps({
        "conn_type": "aws", "login": S3_ACCESS_KEY, "password": s3_secret(demo),
        "extra": {"endpoint_url": demo_s3(demo).endpoint_url, "region_name": DEFAULT_REGION, "bucket": S3_BUCKET},
    })
    if demo.secured:  # mirrorflow's Kafka connections, its password included: the environment, never an argument
        env.update(kafka_connections_env(demo))
    return env


def password_file(demo: DemoSettings) -> Path:
    """The simple auth manager's passwords (0600): the demo's user's, generated once or MIRRORFLOW_DEMO_PASSWORD."""
    return demo.airflow_home / "simple_auth_manager_passwords.json.generated"


def demo_password(demo: DemoSettings) -> str:
    """The UI password: from MIRRORFLOW_DEMO_PASSWORD, else generated once and kept in .run/."""
    pw_file = password_file(demo)
    if pw_file.exists():
        stored = json.loads(pw_file.read_text()).get(USER)
        if stored and not os.environ.get("MIRRORFLOW_DEMO_PASSWORD"):
            return stored
    password = os.environ.get("MIRRORFLOW_DEMO_PASSWORD") or secrets.token_urlsafe(9)
    demo.airflow_home.mkdir(parents=True, exist_ok=True)
    pw_file.write_text(json.dumps({USER: password}))
    pw_file.chmod(0o600)
    return password


def api(demo: DemoSettings, password: str, attempts: int = 5) -> AirflowApi:
    """The demo user's session with the REST API."""
    return AirflowApi(demo.ui_base, USER, password, attempts)


def ui_healthy(demo: DemoSettings) -> bool:
    return healthy(demo.ui_base)


def dags_listed(demo: DemoSettings, password: str) -> set[str]:
    """DAG ids the REST API shows the demo user: proves the login and the DAG parse at once."""
    return listed_dags(api(demo, password, attempts=1))


def expected_dags(demo: DemoSettings) -> set[str]:
    """Every DAG id of dags/: one file per DAG, named after it, and one level DAG per level of the topology.

    The dag-processor parses the files one by one; waiting for all of them (not only
    the level DAGs) keeps the demo from reporting ready with half the DAGs missing.
    """
    single = {path.stem for path in (REPO / "dags").glob("mirror_*.py")} - {"mirror_levels"}
    return single | {f"mirror_level_{lvl}" for lvl in load_topology(demo.topology).levels}


def import_errors(env: Mapping[str, str]) -> str:
    out = subprocess.run(["airflow", "dags", "list-import-errors", "-o", "plain"], env=env, capture_output=True,
                         text=True)
    return out.stdout.strip()


def import_pools(demo: DemoSettings, env: dict[str, str]) -> None:
    """The pools of deploy/pools.json (the operations pool): the same in the demo, platform mode and compose."""
    out = subprocess.run(["airflow", "pools", "import", str(POOLS)], env=env, capture_output=True, text=True,
                         cwd=demo.airflow_home)
    if out.returncode != 0:
        raise SystemExit(f"mirrorflow demo: airflow pools import {POOLS} failed:\n{out.stderr[-3000:]}")


# --------------------------------------------------------------------------- start and stop


def _standalone_pgid(demo: DemoSettings) -> int | None:
    """The process group of the demo's Airflow standalone if it runs."""
    pid_file = demo.airflow_home / "standalone.pid"
    if pid_file.exists() and group_alive(int(pid_file.read_text())):
        return int(pid_file.read_text())
    return None


def start_airflow(demo: DemoSettings) -> str:
    """Start (or find) Airflow standalone; returns the demo user's password once the DAGs are listed."""
    env = airflow_env(demo)
    password = demo_password(demo)
    home = demo.airflow_home
    pid_file = home / "standalone.pid"
    log_file = home / "standalone.log"
    if _standalone_pgid(demo) is not None:
        say(f"Airflow standalone already running (pid {pid_file.read_text().strip()})")
    else:
        if ui_healthy(demo):
            raise SystemExit(f"mirrorflow demo: port {demo.ui_port} already answers; set MIRRORFLOW_DEMO_UI_PORT "
                             "to another port")
        say(f"Starting Airflow standalone (SQLite in {home}), log: {log_file}")
        with open(log_file, "ab") as log:
            proc = subprocess.Popen(["airflow", "standalone"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, cwd=home)
        pid_file.write_text(str(proc.pid))
        (home / "standalone.mode").write_text(demo.mode + "\n")
        (home / "standalone.spark").write_text(demo.spark_mode + "\n")

    def tail() -> str:
        return "last lines of the log:\n" + "\n".join(log_file.read_text(errors="replace").splitlines()[-30:])

    wait_for("the Airflow UI to answer", lambda: ui_healthy(demo), timeout=240, interval=2, on_timeout=tail)
    import_pools(demo, env)
    expected = expected_dags(demo)
    wait_for(f"the DAGs {sorted(expected)} to be listed", lambda: expected <= dags_listed(demo, password),
             timeout=240, interval=3,
             on_timeout=lambda: f"listed: {sorted(dags_listed(demo, password))}\nimport errors:\n" + import_errors(env))
    dags = sorted(dags_listed(demo, password))
    say(f"Airflow UI: http://127.0.0.1:{demo.ui_port}  login: {USER} / {password}")
    say(f"mirrorflow DAGs: {', '.join(dags)}")
    return password


def stop_airflow(demo: DemoSettings) -> None:
    """Ctrl-C first (standalone stops its components on it), then TERM, then KILL the rest."""
    home = demo.airflow_home
    pid_file = home / "standalone.pid"
    if pid_file.exists():
        pgid = int(pid_file.read_text())
        if group_alive(pgid):
            say(f"Stopping Airflow standalone (process group {pgid})")
            stop_group(pgid, ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 5)),
                       first_done=lambda: not leader_running(pgid))
        pid_file.unlink()
    (home / "standalone.mode").unlink(missing_ok=True)
    (home / "standalone.spark").unlink(missing_ok=True)


# --------------------------------------------------------------------------- one demo at a time


def _recorded(demo: DemoSettings, name: str, default: str, missing: str | None = None) -> str:
    """A mode Airflow standalone was started in (``standalone.<name>``): ``default`` if empty, ``missing`` if none."""
    try:
        return (demo.airflow_home / f"standalone.{name}").read_text().strip() or default
    except FileNotFoundError:
        return default if missing is None else missing


def running_parts(demo: DemoSettings, mode: str) -> list[str]:
    """What of the demo in ``mode`` runs now: its Kafka clusters, and Airflow if it was started in that mode."""
    parts = []
    up = running_clusters(demo.secured_kafka_run if mode == "secured" else demo.plain_kafka_run)
    if up:
        parts.append(f"Kafka {', '.join(up)}")
    # The mode Airflow standalone was started in (its topology and connections differ).
    if _standalone_pgid(demo) is not None and _recorded(demo, "mode", "plaintext") == mode:
        parts.append("Airflow standalone")
    return parts


def refuse_other_spark_mode(demo: DemoSettings) -> None:
    """A running Airflow keeps the Spark connection it started with: another MIRRORFLOW_DEMO_SPARK needs a stop."""
    if _standalone_pgid(demo) is None:
        return
    # Without the file: started before the demo had a Connect server.
    started_with = _recorded(demo, "spark", "connect", missing="submit")
    if started_with != demo.spark_mode:
        raise SystemExit(f"mirrorflow demo: Airflow runs with MIRRORFLOW_DEMO_SPARK={started_with}, and this start "
                         f"asks for {demo.spark_mode}. Stop it with `make stop`, then start again.")


def refuse_platform(demo: DemoSettings) -> None:
    """Platform mode (make platform) runs the demo's clusters on the same ports: one of the two at a time."""
    up = holding_our_ports(demo, REPO / ".run" / "platform" / "kafka")
    if up:
        raise SystemExit(f"mirrorflow demo: platform mode's clusters run ({', '.join(up)}) on the ports the demo "
                         "needs; stop it with `make platform-stop`, then run `make demo` again")


def refuse_other_mode(demo: DemoSettings) -> None:
    """One demo at a time: the other mode's clusters hold the same ports, and Airflow runs one topology."""
    other = "plaintext" if demo.secured else "secured"
    running = running_parts(demo, other)
    if running:
        ours = "MIRRORFLOW_SECURED=1 make demo" if demo.secured else "make demo"
        raise SystemExit(f"mirrorflow demo: the {other} demo is running ({'; '.join(running)}), and this start "
                         f"asks for the {demo.mode} one. Stop it with `make stop`, then run `{ours}` again.")
