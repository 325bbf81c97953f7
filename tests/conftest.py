"""Session-wide set-up shared by every test area.

Airflow reads its configuration when it is first imported, so the throwaway
AIRFLOW_HOME (SQLite, no examples, this repo's dags/ and plugins/) is put in the
environment here, at conftest import time, before any test module can import
Airflow. Each test session gets its own home and database.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_airflow_home = Path(tempfile.mkdtemp(prefix="mirrorflow-airflow-"))
os.environ["AIRFLOW_HOME"] = str(_airflow_home)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_airflow_home / 'airflow.db'}"
# One Fernet key for the session, so every process (tests, `airflow dags test` in a subprocess,
# standalone) encrypts and decrypts Variables and connections alike.
if not os.environ.get("AIRFLOW__CORE__FERNET_KEY"):
    import base64

    os.environ["AIRFLOW__CORE__FERNET_KEY"] = base64.urlsafe_b64encode(os.urandom(32)).decode()
# DAG files parse the topology named here; tests that need their own clusters
# build DAGs from their own topology objects instead of changing this.
os.environ.setdefault("MIRROR_TOPOLOGY", str(REPO / "topologies" / "demo.yaml"))
# Spark's Python workers must run this interpreter (the venv's), or they cannot
# import confluent-kafka and mirrorflow.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
# The level DAGs submit their job with spark-submit (from the venv's pyspark) through
# the Spark provider, whose connection says where: local[*] here.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[*]"}')
# Spark binds and advertises loopback only (it would pick the machine's interface address).
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

# plugins/ is on sys.path inside Airflow; make the same true for tests.
for path in (REPO / "plugins", REPO / "include"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
# The development package (mirrorflow_dev/ at the repository root: local Kafka, S3, Spark) for the
# tests and for the commands they start (`python -m mirrorflow_dev.kafka`), from whatever directory.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)

pytest_plugins = [
    "tests.fixtures.kafka",
    "tests.fixtures.airflow",
    "tests.fixtures.spark",
    "tests.fixtures.standalone",
    "tests.fixtures.browser",
    "tests.fixtures.registry",
    "tests.fixtures.s3",
    "tests.fixtures.operator_state",
    "tests.fixtures.topologies",
    "tests.fixtures.secured",
    "tests.fixtures.prometheus",
    "tests.fixtures.workers",
    "tests.fixtures.receivers",
    "tests.fixtures.timeline",
]

#: Free space the suite asks for where it writes (Kafka logs, Spark's scratch, the installed-wheel test's
#: venv, throwaway Airflow homes): about three times what a whole run was seen to take (docs/setup.md).
#: ``MIRRORFLOW_TEST_MIN_FREE_MB`` changes it.
MIN_FREE_MB = int(os.environ.get("MIRRORFLOW_TEST_MIN_FREE_MB", "3000"))


def pytest_sessionstart(session) -> None:
    """Refuse to start, naming the place, where the disk is nearly full: a suite that runs out of space
    fails dozens of unrelated tests with errors that never mention the disk (it happened to CI)."""
    if hasattr(session.config, "workerinput"):  # checked once, by the controller
        return
    for place in (Path(tempfile.gettempdir()), REPO):
        free_mb = shutil.disk_usage(place).free // 2**20
        if free_mb < MIN_FREE_MB:
            pytest.exit(f"mirrorflow tests: {free_mb} MB free where {place} is, and the suite needs about "
                        f"{MIN_FREE_MB} MB (MIRRORFLOW_TEST_MIN_FREE_MB). Free some space first: uv's cache "
                        f"(`.venv/bin/uv cache prune`) and old test homes in {tempfile.gettempdir()} are the "
                        "usual places", returncode=3)


def pytest_sessionfinish(session, exitstatus) -> None:
    """Remove this process's throwaway Airflow home after a run that passed; one that failed keeps it, with
    its task logs, for reading (each worker and the controller have one, and every run left them in /tmp)."""
    if exitstatus == 0:
        shutil.rmtree(_airflow_home, ignore_errors=True)
