"""The local driver JVM's start-up options: the class archive that ``make setup`` builds is really used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorflow import spark as local_spark

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "plugins"))
from mirrorflow_airflow.spark import spark_conf  # noqa: E402  (plain Python: no Airflow import)

_JOB = """
from pyspark import SparkConf, SparkContext
sc = SparkContext(conf=SparkConf().setAppName("mirrorflow-archive-probe"))
assert sc.parallelize(range(4), 2).map(lambda x: x * 2).collect() == [0, 2, 4, 6]
sc.stop()
"""


def test_without_an_archive_the_driver_gets_the_c1_compiler_only(tmp_path):
    assert local_spark.driver_java_options(tmp_path) == local_spark.C1_ONLY
    assert local_spark.archive_path(tmp_path).parent == tmp_path / "spark"


def test_a_local_job_loads_spark_from_the_archive_setup_built(tmp_path):
    archive = local_spark.archive_path()
    assert archive is not None and archive.is_file(), f"make setup builds {archive}"
    conf = spark_conf("local[2]")
    assert conf["spark.driver.extraJavaOptions"] == f"-XX:SharedArchiveFile={archive} {local_spark.C1_ONLY}"
    assert "spark.driver.extraJavaOptions" not in spark_conf("spark://elsewhere:7077")

    script, log = tmp_path / "job.py", tmp_path / "classes.log"
    script.write_text(_JOB, encoding="utf-8")
    conf["spark.driver.extraJavaOptions"] += f" -Xlog:class+load=info:file={log}"
    confs = [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]
    proc = subprocess.run([str(Path(sys.executable).with_name("spark-submit")), "--master", "local[2]", *confs,
                           str(script)], env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = [line for line in log.read_text().splitlines() if "org.apache.spark.SparkContext " in line]
    assert loaded and "shared objects file (top)" in loaded[0], loaded
