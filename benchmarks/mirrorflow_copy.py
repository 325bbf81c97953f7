"""mirrorflow's contender: the level job itself, submitted to Spark exactly as ``mirror_level_<L>`` does.

One link (``src`` -> ``dst``, level 1), the whole topic in one run. The clock
runs from ``spark-submit`` until the job has exited, which is after its last
transaction (copies and checkpoint) was committed on the target; the job's own
split (planning, copying) comes from its result. Spark's start-up is part of
the time, as it is for every scheduled micro-batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mirrorflow.copy.job import JOB_ENV, JobSpec, LinkJob

REPO = Path(__file__).resolve().parents[1]


def mirrorflow_copy(source: str, target: str, topic: str, *, txn_records: int | None = None,
                    master: str = "local[*]") -> dict:
    spec = JobSpec(level=1, run_id=f"bench-{topic}", topics=(topic,),
                   links=(LinkJob("src.L1", 1, "src", "dst", txn_records=txn_records),),
                   clusters={"src": {"bootstrap.servers": source}, "dst": {"bootstrap.servers": target}})
    spark_submit = Path(sys.executable).with_name("spark-submit")
    with tempfile.TemporaryDirectory(prefix="mirrorflow-bench-") as tmp:
        result_path = Path(tmp) / "result.json"
        env = {**os.environ, JOB_ENV: spec.to_json(), "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
               "PYTHONPATH": os.pathsep.join([str(REPO / "include"), os.environ.get("PYTHONPATH", "")])}
        started = time.monotonic()
        proc = subprocess.run([str(spark_submit), "--master", master, "--conf", "spark.ui.showConsoleProgress=false",
                               str(REPO / "spark_jobs" / "mirror_level.py"), "--result", str(result_path)],
                              env=env, capture_output=True, text=True)
        seconds = time.monotonic() - started
        if proc.returncode != 0 or not result_path.exists():
            raise RuntimeError(f"mirrorflow copy job failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                               f"{proc.stderr[-2000:]}")
        result = json.loads(result_path.read_text())
    return {"seconds": seconds, "records": result["copied"], "plan_s": result["plan_s"], "copy_s": result["copy_s"],
            "spark_tasks": result["spark_tasks"]}
