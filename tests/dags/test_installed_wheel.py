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

import pytest

from mirrorflow_dev.install import PLUGINS_PROBE, guide_blocks, install_wheel, pool_commands, run, user_env
from tests.integration.mirroring import FOUR, assert_exactly_once, topic_everywhere, topology, traffic

pytestmark = [pytest.mark.airflow, pytest.mark.kafka]

OLDEST = "3.3.0"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv with the wheel built from this checkout, as section 1 of the guide installs it; its bin/."""
    return install_wheel(tmp_path_factory.mktemp("installed"), OLDEST)


def test_the_wheel_on_the_oldest_airflow_runs_the_level_dags_to_convergence(installed, kafka_clusters, make_topic,
                                                                            tmp_path):
    airflow = str(installed / "airflow")
    version = run([str(installed / "python"), "-c", "import airflow; print(airflow.__version__)"]).split()[-1]
    assert version == OLDEST

    [dag_file] = guide_blocks("python")
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "mirrorflow_dags.py").write_text(dag_file)
    topic = topic_everywhere(make_topic, partitions=2)
    topo_file = tmp_path / "topology.yaml"
    topo_file.write_text(topology(kafka_clusters, FOUR, [topic]).to_yaml())
    env = user_env(installed, tmp_path / "home", dags, topo_file)

    run([airflow, "db", "migrate"], env=env)
    pools = pool_commands()
    assert len(pools) == 2, pools
    for line in pools:
        run(["bash", "-c", line], env=env)

    # the plugin through its entry point, once, without an import error; every DAG parsed from the one file
    plugins = json.loads(run([str(installed / "python"), "-c", PLUGINS_PROBE], env=env).splitlines()[-1])
    assert plugins["names"].count("mirrorflow") == 1 and not plugins["errors"], plugins
    parsed = json.loads(run([str(installed / "python"), "-c", (
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
        out = run([airflow, "dags", "test", f"mirror_level_{level}"], env=env, cwd=tmp_path)
        assert '"event":"copy_run"' in out and script in out, out[-3000:]
    assert_exactly_once(kafka_clusters, ["c1", "c2", "c3", "c4"], topic, expected)
