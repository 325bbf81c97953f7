"""The built wheel in a fresh virtual environment on the oldest supported Airflow, set up as docs/install.md says.

No checkout on the path. The environment is new: Python 3.11, the wheel with its
``airflow`` extra at ``constraints-airflow-3.3.0.txt``, and the full pyspark put back
last. It gets a fresh ``AIRFLOW_HOME``, a DAG folder holding only the guide's one
file, the guide's pools, a topology and ``spark_default``. Its level DAGs then
copy the session's four clusters into sync under ``airflow dags test``, each run
a spark-submit of the entry script the wheel carries, run by the installed
package on executors in that environment's Python. The newest supported Airflow
(3.3.2) is the repository's own environment, which the rest of the suite runs on.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.mirroring import FOUR, assert_exactly_once, topic_everywhere, topology, traffic

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[2]
OLDEST = "3.3.0"
CONSTRAINTS = REPO / f"constraints-airflow-{OLDEST}.txt"
GUIDE = REPO / "docs" / "install.md"


def _guide_blocks(language: str) -> list[str]:
    """The guide's fenced blocks in ``language``, in order: the test runs what a user copies."""
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 900, cwd: Path = Path("/")) -> str:
    """``cmd``'s output; run outside the checkout, so that nothing of it is on the path of a ``python -c``."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(cmd[:4])} ... exited {done.returncode}:\n" + (
        done.stdout + done.stderr)[-4000:]
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel built from this checkout, as section 1 of the guide installs it; its bin/."""
    root = tmp_path_factory.mktemp("installed")
    uv = Path(sys.executable).parent / "uv"  # scripts/bootstrap.sh installs uv into .venv
    _run([str(uv), "build", "--wheel", "-o", str(root / "dist"), str(REPO)], timeout=300)
    [wheel] = (root / "dist").glob("mirrorflow-*.whl")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    _run([str(uv), "pip", "install", "--quiet", "--python", python, f"{wheel}[airflow]", "-c", str(CONSTRAINTS)])
    pyspark = next(line for line in CONSTRAINTS.read_text().splitlines() if line.startswith("pyspark=="))
    _run([str(uv), "pip", "install", "--quiet", "--python", python, "--no-deps", "--reinstall", pyspark])
    return venv / "bin"


def _user_env(bin_dir: Path, home: Path, dags: Path, topology_file: Path) -> dict[str, str]:
    """What the guide tells a user to set, on a clean environment: nothing of this checkout or this test session."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME", "USER")}
    return {**keep,
            "PATH": f"{bin_dir}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "150",
            "MIRROR_TOPOLOGY": str(topology_file),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PYSPARK_PYTHON": str(bin_dir / "python"),
            "SPARK_LOCAL_IP": "127.0.0.1"}


def test_the_wheel_on_the_oldest_airflow_runs_the_level_dags_to_convergence(installed, kafka_clusters, make_topic,
                                                                            tmp_path):
    airflow = str(installed / "airflow")
    version = _run([str(installed / "python"), "-c", "import airflow; print(airflow.__version__)"]).split()[-1]
    assert version == OLDEST

    [dag_file] = _guide_blocks("python")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "mirrorflow_dags.py").write_text(dag_file)
    topic = topic_everywhere(make_topic, partitions=2)
    topo_file = tmp_path / "topology.yaml"
    topo_file.write_text(topology(kafka_clusters, FOUR, [topic]).to_yaml())
    env = _user_env(installed, tmp_path / "home", dags, topo_file)

    _run([airflow, "db", "migrate"], env=env)
    pools = [line for block in _guide_blocks("bash") for line in block.splitlines()
             if line.startswith("airflow pools set")]
    assert len(pools) == 2, pools
    for line in pools:
        _run(["bash", "-c", line], env=env)

    # the plugin through its entry point, once, without an import error; every DAG parsed from the one file
    plugins = json.loads(_run([str(installed / "python"), "-c", (
        "import json; from airflow import plugins_manager as pm; p, e = pm._get_plugins(); "
        "print(json.dumps({'names': [x.name for x in p], 'errors': e}))")], env=env).splitlines()[-1])
    assert plugins["names"].count("mirrorflow") == 1 and not plugins["errors"], plugins
    parsed = json.loads(_run([str(installed / "python"), "-c", (
        "import json, os; from airflow.dag_processing.dagbag import DagBag; "
        "b = DagBag(os.environ['AIRFLOW__CORE__DAGS_FOLDER']); "
        "print(json.dumps({'errors': b.import_errors, 'dags': sorted(b.dag_ids)}))")], env=env).splitlines()[-1])
    assert not parsed["errors"], parsed["errors"]
    assert {"mirror_level_1", "mirror_level_3", "mirror_offsets", "mirror_failover_consumer_group",
            "mirror_archive"} <= set(parsed["dags"]), parsed["dags"]

    # traffic on every cluster; levels 1, 3, 1 bring it everywhere (pairs, across, pairs again), each run a
    # spark-submit of the entry script inside the installed wheel
    expected = [m for c in ("c1", "c2", "c3", "c4") for m in traffic(kafka_clusters, c, topic, 50)]
    script = f"{installed.parent}/lib/python3.11/site-packages/mirrorflow_airflow/spark_jobs/mirror_level.py"
    for level in (1, 3, 1):
        out = _run([airflow, "dags", "test", f"mirror_level_{level}"], env=env, cwd=tmp_path)
        assert '"event":"copy_run"' in out and script in out, out[-3000:]
    assert_exactly_once(kafka_clusters, ["c1", "c2", "c3", "c4"], topic, expected)
