"""Platform mode: the production shape on one machine, without Docker, driven by the scheduler alone.

``make platform`` runs ``start``:

1. the demo's four Kafka clusters and S3 server (the demo's parts in
   mirrorflow_dev/demo/, with their state under ``.run/platform/``);
2. PostgreSQL (Airflow's metadata database) and Redis (the Celery broker), from
   Debian's packages, on loopback;
3. a Spark standalone master and worker, and the Spark Connect server on them:
   every level run, backfill and archive runs there (``spark_default`` is a
   ``spark_connect`` connection; ``MIRRORFLOW_PLATFORM_SPARK=submit`` makes it a
   spark-submit to the master instead);
4. Airflow as separate processes: ``airflow db migrate``, the pools of
   deploy/pools.json, then the api-server, scheduler, dag-processor, triggerer
   and two Celery workers, with the settings of deploy/airflow.env (the file the
   compose stack reads too);
5. it unpauses the level DAGs, ``mirror_offsets`` and ``mirror_lag_monitor``
   (the topology is the demo's, its levels scheduled every
   ``MIRRORFLOW_PLATFORM_SCHEDULE``, default 30s), produces a batch on every
   cluster, and waits, triggering nothing, until the scheduler's runs have put
   every message on every cluster exactly once; it prints the demo's table.

``make platform-stop`` (``stop``) ends it all; state and logs stay in ``.run/platform/``.
Secrets (database, Redis, Fernet, JWT, the UI password) are generated once into
0600 files there and reach the processes through their environment only.
docs/platform.md is the guide.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The core (include/) and the development package (mirrorflow_dev/, at the repository root).
for _path in (REPO / "include", REPO):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
import yaml  # noqa: E402

from mirrorflow.topology import load_topology  # noqa: E402
from mirrorflow_dev.airflow_api import unpause  # noqa: E402
from mirrorflow_dev.demo import servers, standalone, traffic  # noqa: E402
from mirrorflow_dev.demo import settings as demo_settings  # noqa: E402
from mirrorflow_dev.demo.mirroring import level_dag_id  # noqa: E402
from mirrorflow_dev.demo.settings import DemoSettings, say, wait_for  # noqa: E402
from mirrorflow_dev.platform import (  # noqa: E402
    Detached,
    LocalPostgres,
    LocalRedis,
    PlatformError,
    SparkStandalone,
)
from mirrorflow_dev.process import write_secret_file  # noqa: E402
from mirrorflow_dev.spark import LocalConnectServer  # noqa: E402

RUN = Path(os.environ.get("MIRRORFLOW_PLATFORM_RUN_DIR", REPO / ".run" / "platform"))
# The demo's parts (its clusters, S3 server, traffic and check) run here with the platform's run dir and
# ports (a variable left empty is the demo's default), plaintext, on a Spark Connect server.
DEMO = DemoSettings(
    run=RUN,
    topology=Path(os.environ.get("MIRRORFLOW_PLATFORM_TOPOLOGY") or demo_settings.DEFAULT_TOPOLOGY),
    ui_port=int(os.environ.get("MIRRORFLOW_PLATFORM_UI_PORT") or 8080),
    s3_port=int(os.environ.get("MIRRORFLOW_PLATFORM_S3_PORT") or 19100),
    spark_connect_port=int(os.environ.get("MIRRORFLOW_PLATFORM_SPARK_CONNECT_PORT") or 15002),
    messages=int(os.environ.get("MIRRORFLOW_PLATFORM_MESSAGES") or 200),
)
SETTINGS = REPO / "deploy" / "airflow.env"
AIRFLOW_HOME = DEMO.airflow_home
SECRETS_FILE = RUN / "secrets.json"
TOPOLOGY = RUN / "topology.yaml"
SCHEDULE = os.environ.get("MIRRORFLOW_PLATFORM_SCHEDULE", "30s")
SPARK_MODE = os.environ.get("MIRRORFLOW_PLATFORM_SPARK", "connect").strip().lower() or "connect"
PG_PORT = int(os.environ.get("MIRRORFLOW_PLATFORM_PG_PORT", "15432"))
REDIS_PORT = int(os.environ.get("MIRRORFLOW_PLATFORM_REDIS_PORT", "16379"))
SPARK_PORT = int(os.environ.get("MIRRORFLOW_PLATFORM_SPARK_PORT", "17077"))
SPARK_MASTER_UI_PORT = int(os.environ.get("MIRRORFLOW_PLATFORM_SPARK_MASTER_UI_PORT", "18980"))
SPARK_WORKER_UI_PORT = int(os.environ.get("MIRRORFLOW_PLATFORM_SPARK_WORKER_UI_PORT", "18981"))
WORKERS = ("worker1", "worker2")
#: What the scheduler runs once the platform is up besides the level DAGs (the rest stays paused, as in
#: the compose stack); MIRRORFLOW_PLATFORM_UNPAUSE="" keeps only the level DAGs running.
SCHEDULED = tuple(d for d in os.environ.get("MIRRORFLOW_PLATFORM_UNPAUSE",
                                            f"mirror_offsets,{demo_settings.LAG_DAG}").split(",") if d.strip())
CONVERGE_TIMEOUT = float(os.environ.get("MIRRORFLOW_PLATFORM_CONVERGE_TIMEOUT", "900"))


def read_settings(path: Path = SETTINGS) -> dict[str, str]:
    """``KEY=VALUE`` lines of deploy/airflow.env (comments and blank lines skipped)."""
    settings = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"mirrorflow platform: {path}:{number}: expected KEY=VALUE, got {line!r}")
        settings[key.strip()] = value.strip()
    return settings


def platform_secrets() -> dict[str, str]:
    """The platform's secrets, generated once into a 0600 file of the run dir; never printed."""
    try:
        stored = json.loads(SECRETS_FILE.read_text())
    except (FileNotFoundError, ValueError):
        stored = {}
    from cryptography.fernet import Fernet

    wanted = {"postgres": lambda: secrets.token_urlsafe(18), "redis": lambda: secrets.token_urlsafe(18),
              "fernet": lambda: Fernet.generate_key().decode(), "jwt": lambda: secrets.token_urlsafe(32),
              "api": lambda: secrets.token_urlsafe(32)}
    if set(wanted) - set(stored):
        stored = {key: stored.get(key) or make() for key, make in wanted.items()}
        write_secret_file(SECRETS_FILE, json.dumps(stored))
    return stored


def postgres() -> LocalPostgres:
    return LocalPostgres(RUN / "postgres", PG_PORT, "airflow", platform_secrets()["postgres"])


def redis() -> LocalRedis:
    return LocalRedis(RUN / "redis", REDIS_PORT, platform_secrets()["redis"])


def spark_cluster() -> SparkStandalone:
    return SparkStandalone(RUN / "spark", SPARK_PORT, SPARK_MASTER_UI_PORT, SPARK_WORKER_UI_PORT,
                           cores=os.cpu_count() or 2, python=sys.executable)


def connect_server() -> LocalConnectServer:
    """The Connect server on the standalone master; its executors on the worker."""
    return LocalConnectServer(DEMO.spark_connect_port, run_dir=DEMO.spark_run, master=spark_cluster().master_url,
                              die_with_parent=False, start_new_session=True,
                              conf={"spark.executor.memory": "2g", "spark.executorEnv.SPARK_LOCAL_IP": "127.0.0.1"})


def write_topology() -> Path:
    """The demo's topology with its levels every SCHEDULE, into the run dir: what the scheduler runs."""
    raw = yaml.safe_load(DEMO.topology.read_text())
    raw.setdefault("replication", {})["schedule"] = SCHEDULE
    TOPOLOGY.write_text("# Generated by scripts/platform_mode.py from " + str(DEMO.topology) + "\n"
                        + yaml.safe_dump(raw, sort_keys=False))
    load_topology(TOPOLOGY)  # a wrong MIRRORFLOW_PLATFORM_SCHEDULE fails here, naming the key
    return TOPOLOGY


def airflow_env() -> dict[str, str]:
    """The demo's Airflow environment, with the shared settings, PostgreSQL, Redis and the platform's Spark."""
    keys = platform_secrets()
    env = standalone.airflow_env(DEMO)
    # The shared settings over the demo's defaults; a setting of the caller's environment wins over both.
    env.update({key: value for key, value in read_settings().items() if key not in os.environ})
    pg = postgres()
    env.update({
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": pg.url,
        "AIRFLOW__CELERY__BROKER_URL": redis().url,
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + pg.url,
        "AIRFLOW__CORE__FERNET_KEY": keys["fernet"],
        "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt"],
        "AIRFLOW__API__SECRET_KEY": keys["api"],
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{DEMO.ui_port}",
        "MIRROR_TOPOLOGY": str(TOPOLOGY),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark_connect", "host": "127.0.0.1", "port": DEMO.spark_connect_port}
            if SPARK_MODE == "connect" else
            {"conn_type": "spark", "host": "spark://127.0.0.1", "port": SPARK_PORT,
             "extra": {"deploy-mode": "client"}}),
    })
    return env


def components(env: dict[str, str]) -> list[Detached]:
    """Airflow's long-running processes, each with its own pid file and log under ``.run/platform/airflow/``."""
    run_dir = AIRFLOW_HOME / "components"
    airflow = str(demo_settings.VENV_BIN / "airflow")
    # The api-server retitles itself "airflow api_server -- host:...".
    parts = [Detached(role, [airflow, role], run_dir, marker=f"airflow {role}|airflow {role.replace('-', '_')}",
                      env=env, cwd=AIRFLOW_HOME)
             for role in ("api-server", "scheduler", "dag-processor", "triggerer")]
    for index, name in enumerate(WORKERS):
        # Both workers read the same log folder; only the first serves logs on the log server's port.
        extra = [] if index == 0 else ["--skip-serve-logs"]
        parts.append(Detached(f"celery-{name}", [airflow, "celery", "worker", "--celery-hostname", f"{name}@%h",
                                                 *extra], run_dir, marker=f"{name}@%h", env=env, cwd=AIRFLOW_HOME))
    return parts


def celery_workers(env: dict[str, str]) -> list[str]:
    """The Celery workers that answer a ping through the broker (their node names)."""
    probe = ("from airflow.providers.celery.executors.celery_executor_utils import app\n"
             "import json\nprint(json.dumps(sorted(k for r in app.control.ping(timeout=3) for k in r)))\n")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return []


def start_airflow() -> str:
    """Migrate, import the pools, start every component; the UI password once the DAGs and workers are up."""
    env = airflow_env()
    password = standalone.demo_password(DEMO)
    env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] = str(standalone.password_file(DEMO))
    parts = components(env)
    if not any(part.running() for part in parts):
        if standalone.ui_healthy(DEMO):
            raise SystemExit(f"mirrorflow platform: port {DEMO.ui_port} already answers (the demo? `make stop`); "
                             "set MIRRORFLOW_PLATFORM_UI_PORT to another port")
        say("Migrating Airflow's metadata database (PostgreSQL)")
        for step in (["db", "migrate"], ["pools", "import", str(demo_settings.POOLS)]):
            out = subprocess.run([str(demo_settings.VENV_BIN / "airflow"), *step], env=env, capture_output=True,
                                 text=True, cwd=AIRFLOW_HOME)
            if out.returncode != 0:
                raise SystemExit(f"mirrorflow platform: airflow {' '.join(step)} failed:\n{out.stderr[-3000:]}")
    for part in parts:
        running = part.pid()
        if running is None:
            say(f"Starting airflow {part.name.replace('celery-', 'celery worker ')}, log: {part.log_path}")
            part.start()
        else:
            say(f"airflow {part.name} already running (pid {running})")
    (AIRFLOW_HOME / "platform.spark").write_text(SPARK_MODE + "\n")

    def tail(part: Detached):
        return lambda: f"last lines of {part.log_path}:\n{part.log_tail()}"

    wait_for("the Airflow API server to answer", lambda: standalone.ui_healthy(DEMO), timeout=240, interval=2,
                  on_timeout=tail(parts[0]))
    expected = standalone.expected_dags(DEMO)
    wait_for(f"the DAGs {sorted(expected)} to be listed", lambda: expected <= standalone.dags_listed(DEMO, password),
             timeout=300, interval=3, on_timeout=lambda: "import errors:\n" + standalone.import_errors(env))
    wanted = {f"{name}@{os.uname().nodename}" for name in WORKERS}
    wait_for(f"the Celery workers {sorted(wanted)} to answer", lambda: wanted <= set(celery_workers(env)),
             timeout=180, interval=3, on_timeout=tail(parts[-1]))
    say(f"Airflow UI: http://127.0.0.1:{DEMO.ui_port}  login: {demo_settings.USER} / {password}")
    say(f"Celery workers: {', '.join(sorted(wanted))}")
    return password


def start_spark() -> None:
    """The standalone master and worker, then (connect mode) the Connect server on them."""
    cluster = spark_cluster()
    say(f"Starting Spark standalone: master {cluster.master_url} (UI http://127.0.0.1:{SPARK_MASTER_UI_PORT}), "
        f"one worker with {cluster.cores} cores; logs in {cluster.run_dir}")
    try:
        cluster.start()
    except PlatformError as exc:
        raise SystemExit(f"mirrorflow platform: {exc}") from None
    if SPARK_MODE == "submit":
        say(f"Spark: every job a spark-submit of its own to {cluster.master_url} (MIRRORFLOW_PLATFORM_SPARK=submit)")
        return
    servers.start_connect(DEMO, connect_server(), f"master {cluster.master_url}", "platform",
                          "MIRRORFLOW_PLATFORM_SPARK_CONNECT_PORT")


def start_servers() -> None:
    for what, server in (("PostgreSQL", postgres()), ("Redis", redis())):
        say(f"Starting {what} on 127.0.0.1:{server.port}, data and log in {server.run_dir}")
        try:
            server.start()
        except PlatformError as exc:
            raise SystemExit(f"mirrorflow platform: {exc}") from None


def unpause_scheduled(password: str) -> None:
    """The level DAGs and SCHEDULED unpaused: from now on the scheduler starts their runs."""
    api = standalone.api(DEMO, password)
    for dag_id in [level_dag_id(level) for level in load_topology(TOPOLOGY).levels] + list(SCHEDULED):
        unpause(api, dag_id)
    also = f" and {', '.join(SCHEDULED)}" if SCHEDULED else ""
    say(f"Unpaused the level DAGs (every {SCHEDULE}){also}: the scheduler alone starts runs")


def converge(password: str) -> None:
    """Produce a batch everywhere and wait, triggering nothing, for the scheduler's runs to mirror it."""
    topology = load_topology(TOPOLOGY)
    tag = traffic.batch_tag()
    produced = traffic.produce_traffic(DEMO, topology, tag)
    started = time.monotonic()
    last: dict[str, str] = {}

    def settled() -> bool:
        nonlocal last
        last = traffic.held_once(DEMO, topology, produced)
        return not last

    wait_for(f"the scheduler's runs to put batch {tag} on every cluster exactly once", settled,
             timeout=CONVERGE_TIMEOUT, interval=10, on_timeout=lambda: f"still: {last}")
    say(f"Mirroring settled in {time.monotonic() - started:.0f}s with the scheduler alone")
    if not traffic.report(DEMO, topology, produced, tag):
        raise SystemExit("mirrorflow platform: the clusters do not all hold every message exactly once "
                         f"(left running for a look; logs under {RUN}; make platform-stop ends it)")


def refuse_demo() -> None:
    """The demo's clusters hold the same ports: one of the two at a time."""
    up = servers.holding_our_ports(DEMO, REPO / ".run" / "demo" / "kafka")
    if up:
        raise SystemExit(f"mirrorflow platform: the demo's clusters run ({', '.join(up)}) on the ports platform "
                         "mode needs; stop the demo with `make stop`, then run `make platform` again")


def start(traffic: bool = True) -> None:
    if SPARK_MODE not in ("connect", "submit"):
        raise SystemExit(f"mirrorflow platform: MIRRORFLOW_PLATFORM_SPARK={SPARK_MODE!r}: expected connect "
                         "(the default) or submit")
    RUN.mkdir(parents=True, exist_ok=True)
    refuse_demo()
    write_topology()
    servers.start_kafka(DEMO)
    servers.start_s3(DEMO)
    start_servers()
    start_spark()
    password = start_airflow()
    unpause_scheduled(password)
    if traffic:
        converge(password)
    say(f"Platform running: UI http://127.0.0.1:{DEMO.ui_port} (login {demo_settings.USER} / {password}); "
        f"Celery workers {', '.join(WORKERS)}; Spark master UI http://127.0.0.1:{SPARK_MASTER_UI_PORT}. "
        "Stop it with: make platform-stop")


def stop() -> None:
    if not SECRETS_FILE.exists():  # never started here: nothing to stop, and no secrets to make up for it
        say(f"Nothing to stop: platform mode never started in {RUN}")
        return
    env = airflow_env()
    leftovers = []
    # Workers first (their running tasks end with them), then the scheduler and the rest.
    for part in reversed(components(env)):
        if part.running():
            say(f"Stopping airflow {part.name}")
        if not part.stop(grace=30):
            leftovers.append(f"airflow {part.name}")
    if not servers.stop_spark(DEMO):
        leftovers.append("the Spark Connect server")
    if not spark_cluster().stop():
        leftovers.append("Spark standalone")
    for what, server in (("Redis", redis()), ("PostgreSQL", postgres())):
        say(f"Stopping {what}")
        if not server.stop():
            leftovers.append(what)
    if not servers.stop_s3(DEMO):
        leftovers.append("the S3 server")
    servers.stop_kafka(DEMO.plain_kafka_run)
    if leftovers:
        raise SystemExit(f"mirrorflow platform: {', '.join(leftovers)} outlived stop; run it again")
    say(f"Stopped. State and logs stay in {RUN} (delete it for a clean slate).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--no-traffic", action="store_true",
                        help="start: start whatever is not running, produce and check nothing (after a fault)")
    args = parser.parse_args()
    stop() if args.action == "stop" else start(traffic=not args.no_traffic)


if __name__ == "__main__":
    main()
