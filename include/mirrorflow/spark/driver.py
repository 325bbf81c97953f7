"""The local Spark driver's JVM start, made shorter: a class-data-sharing archive and the C1 compiler.

Why: on ``local[*]`` every scheduled micro-batch is a fresh ``spark-submit``, and
its driver JVM spends seconds loading and verifying the same few thousand Spark
classes from jars each time (``benchmarks/spark_start.py``, docs/benchmarks.md).
Java's application class-data sharing (AppCDS) maps them from an archive
instead. The archive is made once per machine, by running a trivial job with
``-XX:ArchiveClassesAtExit`` (``make setup`` does it:
``python -m mirrorflow_dev.spark prepare``), and its name carries what it
depends on (the pyspark version and the java binary), so an upgrade of either
only means the next setup builds a new one. A JVM given an archive that does
not match its class path ignores it and starts the slow way; nothing depends
on it for correctness.

``-XX:TieredStopAtLevel=1`` (the quick C1 compiler only): in these jobs the
driver JVM schedules tasks and passes a few bytes of results; the copying runs
in Python workers and librdkafka, so the optimising compiler's warm-up is cost
without return.

Only for local masters (``spark_conf`` in the Airflow plugin decides): on a
cluster the driver runs elsewhere and the archive's path means nothing there.
This module is what the plugin needs at run time; building the archive is
development tooling (``mirrorflow_dev.spark``), which finds its place here.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
from pathlib import Path

from mirrorflow.cache_root import default_cache_root

C1_ONLY = "-XX:TieredStopAtLevel=1"


def java_path() -> str | None:
    """The java binary ``spark-submit`` runs: ``$JAVA_HOME/bin/java`` when set, else ``java`` from PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def archive_path(cache_root: Path | None = None) -> Path | None:
    """Where this machine's archive belongs (it may not exist yet); ``None`` without pyspark or java."""
    try:
        # The distribution's metadata, not ``import pyspark``: this runs in every Airflow task
        # that submits a job, and importing pyspark there would cost more than it tells.
        version = importlib.metadata.version("pyspark")
        java = java_path()
        if java is None:
            return None
        binary = Path(os.path.realpath(java))
    except Exception:  # noqa: BLE001 - no archive is a slower start, never an error
        return None
    stat = binary.stat()
    key = hashlib.sha256(f"{binary}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return (cache_root or default_cache_root()) / "spark" / f"driver-{version}-{key}.jsa"


def driver_java_options(cache_root: Path | None = None) -> str:
    """``spark.driver.extraJavaOptions`` for a local master: C1 only, and the archive when it exists."""
    path = archive_path(cache_root)
    if path is not None and path.is_file():
        return f"-XX:SharedArchiveFile={path} {C1_ONLY}"
    return C1_ONLY
