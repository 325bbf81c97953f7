"""Where a micro-batch's Spark start-up goes, and what each start-up change saved.

A trivial job (one two-task RDD action) is submitted exactly like the level job
(``spark-submit``, ``local[*]``, the operator's Spark settings) in three ways:
on a SparkSession with the JVM's defaults (the entry points before
2026-11-22), on a bare SparkContext with the JVM's defaults (before
2026-11-23), and as now: a bare SparkContext whose driver JVM maps Spark's
classes from the archive ``make setup`` builds and uses the C1 compiler only
(:mod:`mirrorflow.spark.driver`). The script reports, from inside: the time until
its Python started (``spark-submit``'s launcher and the JVM), until the
context was up, the first job (starting the Python workers), and the stop.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.mirrorflow_copy import REPO, spark_conf

_PROBE = '''
import os, sys, time
t0 = time.time()
if sys.argv[1] == "context":
    from pyspark import SparkConf, SparkContext
    sc = SparkContext(conf=SparkConf().setAppName("mirrorflow-start-probe"))
else:
    from pyspark.sql import SparkSession
    sc = SparkSession.builder.appName("mirrorflow-start-probe").getOrCreate().sparkContext
t1 = time.time()
sc.parallelize([1, 2], 2).map(lambda x: x).collect()
t2 = time.time()
sc.stop()
t3 = time.time()
print("PROBE", t0 - float(os.environ["PROBE_T0"]), t1 - t0, t2 - t1, t3 - t2)
'''


#: variant -> (entry point the probe uses, whether the driver gets mirrorflow's JVM options)
VARIANTS = {"session": ("session", False), "context": ("context", False), "archive": ("context", True)}


def _once(variant: str, script: Path) -> dict[str, float]:
    entry, jvm_options = VARIANTS[variant]
    conf = spark_conf("local[*]")
    if not jvm_options:
        conf.pop("spark.driver.extraJavaOptions", None)
    confs = [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]
    started = time.time()
    env = {**os.environ, "PROBE_T0": repr(started), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([str(Path(sys.executable).with_name("spark-submit")), "--master", "local[*]", *confs,
                           str(script), entry], env=env, capture_output=True, text=True, cwd=REPO)
    wall = time.time() - started
    line = next((l for l in proc.stdout.splitlines() if l.startswith("PROBE ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"start-up probe ({variant}) failed:\n{proc.stderr[-2000:]}")
    launch, context, first_job, stop = map(float, line.split()[1:])
    return {"total_s": wall, "launch_s": launch, "context_s": context, "first_job_s": first_job, "stop_s": stop}


def measure(*, runs: int = 3, progress: Callable[[str], None]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mirrorflow-start-") as tmp:
        script = Path(tmp) / "probe.py"
        script.write_text(_PROBE)
        samples: dict[str, list[dict[str, float]]] = {variant: [] for variant in VARIANTS}
        for _ in range(runs):  # interleaved, so drift on the machine hits both alike
            for variant in samples:
                samples[variant].append(_once(variant, script))
    out = {variant: {key: round(statistics.median(s[key] for s in rows), 2) for key in rows[0]}
           for variant, rows in samples.items()}
    for variant, row in out.items():
        progress(f"Spark start ({variant}): {row}")
    return {"runs": runs, **out}
