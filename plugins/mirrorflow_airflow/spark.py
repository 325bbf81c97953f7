"""How the copy job reaches Spark: the entry point, the core package shipped with it, and its Python.

- ``local[*]`` (the default here): the executors are Python workers on this machine;
  they run this interpreter (``spark.pyspark.python``), whose environment has
  ``mirrorflow`` and confluent-kafka installed.
- A Spark cluster (``spark://...``, named by the Airflow Spark connection): the core
  package is shipped as a zip (``--py-files``), built from the installed package at
  submit time, and confluent-kafka's native library travels in a packed Python
  environment (``venv-pack`` or ``conda-pack``) named by ``MIRRORFLOW_SPARK_ARCHIVE``,
  unpacked by Spark on every executor (``spark.archives``) and used as their Python.
  See spark_jobs/README.md.
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

import mirrorflow
from mirrorflow.spark import driver_java_options

_HERE = Path(__file__).resolve().parent
#: Where the Spark entry points are: ``MIRRORFLOW_SPARK_JOBS`` (containers mount them there), else the copy an
#: installed wheel carries inside this package, else a checkout's ``spark_jobs/``.
SPARK_JOBS = Path(os.environ.get("MIRRORFLOW_SPARK_JOBS") or (
    _HERE / "spark_jobs" if (_HERE / "spark_jobs").is_dir() else _HERE.parents[1] / "spark_jobs"))
JOB_SCRIPT = SPARK_JOBS / "mirror_level.py"
ARCHIVE_ENV = "MIRRORFLOW_SPARK_ARCHIVE"
_ARCHIVE_ALIAS = "mirrorflow_env"


def core_zip(dest_dir: Path) -> Path:
    """A zip of the installed ``mirrorflow`` package (sources only), for ``--py-files``."""
    package = Path(mirrorflow.__file__).resolve().parent
    dest = dest_dir / "mirrorflow.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*.py")):
            zf.write(path, Path("mirrorflow") / path.relative_to(package))
    return dest


def spark_conf(master: str) -> dict[str, str]:
    """Spark settings for the copy job on ``master``."""
    conf = {"spark.ui.showConsoleProgress": "false"}
    archive = os.environ.get(ARCHIVE_ENV)
    if archive:
        conf["spark.archives"] = f"{archive}#{_ARCHIVE_ALIAS}"
        conf["spark.pyspark.python"] = f"./{_ARCHIVE_ALIAS}/bin/python"
        conf["spark.pyspark.driver.python"] = sys.executable
    elif master.startswith("local"):
        conf["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON", sys.executable)
        conf["spark.pyspark.driver.python"] = os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        # The driver JVM starts sooner (mirrorflow.spark.driver says how and why).
        conf["spark.driver.extraJavaOptions"] = driver_java_options()
    return conf
