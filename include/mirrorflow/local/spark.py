"""The local Spark driver's JVM start, made shorter: a class-data-sharing archive and the C1 compiler.

Why: on ``local[*]`` every scheduled micro-batch is a fresh ``spark-submit``, and
its driver JVM spends about two seconds loading and verifying the same few
thousand Spark classes from jars each time (``benchmarks/spark_start.py``).
Java's application class-data sharing (AppCDS) maps them from an archive
instead. The archive is made once per machine, by running a trivial job with
``-XX:ArchiveClassesAtExit`` (``make setup`` does it), and its name carries what
it depends on (the pyspark version and the java binary), so an upgrade of
either only means the next setup builds a new one. A JVM given an archive that
does not match its class path ignores it and starts the slow way; nothing
depends on it for correctness.

``-XX:TieredStopAtLevel=1`` (the quick C1 compiler only): in these jobs the
driver JVM schedules tasks and passes a few bytes of results; the copying runs
in Python workers and librdkafka, so the optimising compiler's warm-up is cost
without return.

Only for local masters (``spark_conf`` in the Airflow plugin decides): on a
cluster the driver runs elsewhere and the archive's path means nothing there.

    python -m mirrorflow.local.spark prepare      # build the archive if missing
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mirrorflow.local.kafka import default_cache_root
from mirrorflow.local.maven import find_java

_WARM_UP = """
from pyspark import SparkConf, SparkContext
sc = SparkContext(conf=SparkConf().setAppName("mirrorflow-class-archive"))
sc.setLogLevel("WARN")
sc.parallelize(range(8), 2).mapPartitions(lambda rows: [sum(rows)]).collect()
sc.stop()
"""

C1_ONLY = "-XX:TieredStopAtLevel=1"


def archive_path(cache_root: Path | None = None) -> Path | None:
    """Where this machine's archive belongs (it may not exist yet); ``None`` without pyspark or java."""
    try:
        # The distribution's metadata, not ``import pyspark``: this runs in every Airflow task
        # that submits a job, and importing pyspark there would cost more than it tells.
        version = importlib.metadata.version("pyspark")
        java = Path(os.path.realpath(find_java()))
    except Exception:  # noqa: BLE001 - no archive is a slower start, never an error
        return None
    stat = java.stat()
    key = hashlib.sha256(f"{java}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return (cache_root or default_cache_root()) / "spark" / f"driver-{version}-{key}.jsa"


def driver_java_options(cache_root: Path | None = None) -> str:
    """``spark.driver.extraJavaOptions`` for a local master: C1 only, and the archive when it exists."""
    path = archive_path(cache_root)
    if path is not None and path.is_file():
        return f"-XX:SharedArchiveFile={path} {C1_ONLY}"
    return C1_ONLY


def prepare(cache_root: Path | None = None, *, force: bool = False) -> Path | None:
    """Build the archive by running a trivial local job whose JVM dumps its classes at exit."""
    path = archive_path(cache_root)
    if path is None:
        print("[mirrorflow.local.spark] no pyspark or java here: no class archive", flush=True)
        return None
    if path.is_file() and not force:
        print(f"[mirrorflow.local.spark] class archive is up to date: {path}", flush=True)
        return path
    import pyspark

    path.parent.mkdir(parents=True, exist_ok=True)
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mirrorflow-cds-") as tmp:
        script = Path(tmp) / "warm_up.py"
        script.write_text(_WARM_UP, encoding="utf-8")
        # Renamed into place only once the JVM wrote it whole (same directory: the rename is atomic).
        partial = path.parent / f".{path.name}.{os.getpid()}.partial"
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}

        def run(java_options: str) -> subprocess.CompletedProcess:
            return subprocess.run([str(spark_submit), "--master", "local[2]",
                                   "--conf", "spark.ui.showConsoleProgress=false",
                                   "--conf", f"spark.driver.extraJavaOptions={java_options}", str(script)],
                                  env=env, capture_output=True, text=True, timeout=300)

        proc = run(f"-XX:ArchiveClassesAtExit={partial}")
        if proc.returncode == 0 and partial.is_file():
            # Prove it maps: -Xshare:on refuses to start on an archive it cannot use (a JVM
            # handed a damaged archive may crash instead of falling back, so none is kept).
            proc = run(f"-XX:SharedArchiveFile={partial} -Xshare:on {C1_ONLY}")
        if proc.returncode != 0 or not partial.is_file():
            partial.unlink(missing_ok=True)
            # Not fatal: every job still runs, only its start is slower.
            print(f"[mirrorflow.local.spark] could not build the class archive (exit {proc.returncode}); "
                  f"Spark jobs start without it:\n{proc.stderr[-2000:]}", file=sys.stderr, flush=True)
            return None
        os.replace(partial, path)
    for stale in path.parent.glob("driver-*.jsa"):
        if stale != path:
            stale.unlink(missing_ok=True)
    print(f"[mirrorflow.local.spark] class archive built in {time.monotonic() - started:.1f}s "
          f"({path.stat().st_size / 2**20:.0f} MiB): {path}", flush=True)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirrorflow.local.spark", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_prepare = sub.add_parser("prepare", help="build the driver's class archive if it is missing")
    p_prepare.add_argument("--force", action="store_true", help="build it again even if it exists")
    p_prepare.add_argument("--cache-dir", type=Path, default=None, help="default: <repo>/.cache")
    args = parser.parse_args(argv)
    prepare(args.cache_dir, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
