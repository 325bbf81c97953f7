"""Where the demo keeps its state, which ports and topology it uses, and how it speaks: one object, no globals.

``make demo`` reads its settings from ``MIRRORFLOW_DEMO_*`` and ``MIRRORFLOW_SECURED``
(:meth:`DemoSettings.from_env`); platform mode builds its own (its run dir and
ports) and hands it to the same parts. Nothing here changes the environment.
:func:`airflow_base_env` is the environment every local Airflow of the
repository starts from: the demo's, platform mode's and the test fixture's
(tests/fixtures/standalone.py).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mirrorflow_dev.process import WaitTimeout, wait_until

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
DEFAULT_TOPOLOGY = REPO / "topologies" / "demo.yaml"
#: The pools of the demo, platform mode and the compose stack (the operations pool).
POOLS = REPO / "deploy" / "pools.json"

# The archive's S3: its access key and bucket, and the topology's archive.conn_id (its default).
S3_ACCESS_KEY = "mirrorflow-demo"
S3_BUCKET = "mirrorflow-demo"
S3_CONN_ID = "mirrorflow_archive"
# MIRRORFLOW_DEMO_SPARK=submit: every Spark job a spark-submit of its own on local[*] instead.
SPARK_MODES = ("connect", "submit")
#: The UI user (the simple auth manager's admin).
USER = "admin"
#: The secured demo: mirrorflow's SCRAM user.
PRINCIPAL = "mirrorflow"

# The sample traffic: one topic the topology selects, a fresh batch per start.
TOPIC = "orders"
TOPIC_PARTITIONS = 3
KEYS = 5
RUN_HEADER = "mirrorflow.demo.run"

# Mirroring: a round is every level once; the four-cluster tree settles in three.
MAX_ROUNDS = 6
# One level run can queue behind a scheduled run, then (MIRRORFLOW_DEMO_SPARK=submit) spark-submit
# on a busy two-core machine, and retry a failed task (30 s back-off): be generous.
RUN_TIMEOUT = 900.0
LAG_DAG = "mirror_lag_monitor"
#: The "Mirror" page inside the Airflow UI (plugins/mirrorflow_airflow/ui; docs/status.md).
PAGE_PATH = "/plugin/mirror"


def _on(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class DemoSettings:
    """One demo's run dir, topology, ports and modes; every path of its state follows from ``run``."""

    run: Path
    topology: Path = DEFAULT_TOPOLOGY
    #: MIRRORFLOW_SECURED=1: the secured demo, on clusters of its own (their data is formatted for one mode).
    secured: bool = False
    ui_port: int = 8080
    s3_port: int = 19100
    spark_connect_port: int = 15002
    spark_mode: str = "connect"
    messages: int = 200

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> DemoSettings:
        """``make demo``'s settings: ``MIRRORFLOW_DEMO_*`` (the end-to-end test runs a second, isolated demo)."""
        return cls(
            # absolute: Airflow's processes read the topology from another directory than the one `make` ran in
            run=Path(environ.get("MIRRORFLOW_DEMO_RUN_DIR", REPO / ".run" / "demo")).absolute(),
            topology=Path(environ.get("MIRRORFLOW_DEMO_TOPOLOGY", DEFAULT_TOPOLOGY)).absolute(),
            secured=_on(environ.get("MIRRORFLOW_SECURED", "")),
            ui_port=int(environ.get("MIRRORFLOW_DEMO_UI_PORT", "8080")),
            s3_port=int(environ.get("MIRRORFLOW_DEMO_S3_PORT", "19100")),
            spark_connect_port=int(environ.get("MIRRORFLOW_DEMO_SPARK_CONNECT_PORT", "15002")),
            spark_mode=environ.get("MIRRORFLOW_DEMO_SPARK", "connect").strip().lower() or "connect",
            messages=int(environ.get("MIRRORFLOW_DEMO_MESSAGES", "200")),
        )

    @property
    def mode(self) -> str:
        return "secured" if self.secured else "plaintext"

    @property
    def plain_kafka_run(self) -> Path:
        return self.run / "kafka"

    @property
    def secured_kafka_run(self) -> Path:
        return self.run / "kafka-secured"

    @property
    def kafka_run(self) -> Path:
        return self.secured_kafka_run if self.secured else self.plain_kafka_run

    @property
    def airflow_home(self) -> Path:
        return self.run / "airflow"

    @property
    def s3_run(self) -> Path:
        """The S3 server: its config, log, pid and secret here, its buckets under data/."""
        return self.run / "s3"

    @property
    def spark_run(self) -> Path:
        """The warm Spark: the Connect server every Spark job of the demo runs on (its log and pid here)."""
        return self.run / "spark-connect"

    @property
    def scram_password_file(self) -> Path:
        """mirrorflow's SCRAM password in the secured demo (0600, never printed)."""
        return self.secured_kafka_run / "mirrorflow.password"

    @property
    def secured_topology(self) -> Path:
        """The topology Airflow runs in the secured demo: each cluster's conn_id instead of its bootstrap."""
        return self.run / "topology.secured.yaml"

    @property
    def ui_base(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"


def airflow_base_env(base: Mapping[str, str], home: Path, port: int, topology: Path, users: str, *,
                     dags_folder: Path = REPO / "dags", spark_connect_port: int | None = None) -> dict[str, str]:
    """``base`` with a local Airflow's settings: its home, API port, this repo's DAGs and plugins, ``topology``.

    ``users`` is the simple auth manager's ``user:role,...``; ``spark_default`` is
    the Connect server on ``spark_connect_port``, or without one a spark-submit
    each on ``local[*]``.
    """
    env = dict(base)
    env.update({
        "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": users,
        "AIRFLOW__API__HOST": "127.0.0.1",
        # LocalExecutor forks one worker per parallelism slot (default 32): a handful
        # is plenty on a small machine.
        "AIRFLOW__CORE__PARALLELISM": env.get("AIRFLOW__CORE__PARALLELISM", "4"),
        "AIRFLOW__API__PORT": str(port),
        # Task processes report to the API server: follow the port we chose.
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        # A busy two-core machine can stall the API server for tens of seconds; the default 5 s
        # makes task processes give up and die (seen in the browser test). Airflow's docs say raise it.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": env.get("AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT", "60"),
        # A DAG file's parse reads Variables through that API server, which standalone starts next to the
        # dag-processor: a parse that began first waited for it and was killed at the default 30 s (seen in a
        # CI run, the API server up 29 s after the parse began), and a demo parses each file once at start.
        # So an import may wait longer than an API call may (docs/setup.md).
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": env.get("AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT", "150"),
        "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT":
            env.get("AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT", "180"),
        "MIRROR_TOPOLOGY": str(topology),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # Spark binds and advertises loopback only, like everything else.
        "SPARK_LOCAL_IP": "127.0.0.1",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark_connect", "host": "127.0.0.1", "port": spark_connect_port}
            if spark_connect_port is not None else {"conn_type": "spark", "host": "local[*]"}),
    })
    return env


def say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def wait_for(what: str, check: Callable[[], T], timeout: float, interval: float = 1.0,
             on_timeout: Callable[[], Any] | None = None) -> T:
    """Poll ``check`` until it returns a truthy value; past the deadline the demo exits naming ``what``."""
    try:
        return wait_until(what, check, timeout, interval, detail=on_timeout or str)
    except WaitTimeout as exc:
        raise SystemExit(f"mirrorflow demo: {exc}") from None
