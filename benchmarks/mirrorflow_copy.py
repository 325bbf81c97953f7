"""mirrorflow's contender: the level job itself, submitted to Spark exactly as ``mirror_level_<L>`` does.

One link (``src`` -> ``dst``, level 1), the whole topic in one run. The clock
runs, as the issue defines it, from ``spark-submit`` to the last message
committed on the target: the job records the wall-clock time when every
partition's last commit (copies and checkpoint) is done (``finished_at``).
Stopping Spark and the process's exit come after that (about 1 s) and are kept
as ``exit_s``. The job's own split (planning, copying) comes from its result.
Spark's start-up is part of the time, as it is for every scheduled micro-batch.

With ``connect_url`` the same job runs as a ``spark_connect`` connection runs it:
a fresh client process (``benchmarks.connect_client``, what the Airflow task
does) plans and sends the copy to a Spark Connect server that is already up;
the clock runs from starting that process to the last commit. The server's own
start happens once, before any clock (the fixed-cost section measures it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.memory import TreeSampler
from mirrorflow.copy.spec import JOB_ENV, JobSpec, LinkJob
from mirrorflow.defaults import DEFAULT_COPY_THREADS

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins"))
from mirrorflow_airflow.spark import spark_conf  # noqa: E402  (plain Python: no Airflow import)


def spark_env(spec: JobSpec) -> dict[str, str]:
    """The environment ``MirrorSparkJobOperator`` gives ``spark-submit`` (spec, interpreter, include/)."""
    return {**os.environ, JOB_ENV: spec.to_json(), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join([str(REPO / "include"), os.environ.get("PYTHONPATH", "")])}


def submit(spec: JobSpec, *, master: str = "local[*]", sample_memory: bool = False,
           connect_url: str | None = None) -> dict:
    """Run the level job on ``spec`` with ``spark-submit`` (or on ``connect_url``); its result plus ``seconds``.

    The ``spark-submit`` command line carries the same Spark settings as ``MirrorSparkJobOperator``
    gives it. ``memory`` (with ``sample_memory``) covers the processes started here, so only the
    ``spark-submit`` path: a Connect server's processes are not this run's.
    """
    with tempfile.TemporaryDirectory(prefix="mirrorflow-bench-") as tmp:
        result_path = Path(tmp) / "result.json"
        if connect_url:
            command = [sys.executable, "-m", "benchmarks.connect_client", connect_url, "--result", str(result_path)]
        else:
            spark_submit = Path(sys.executable).with_name("spark-submit")
            confs = [arg for k, v in spark_conf(master).items() for arg in ("--conf", f"{k}={v}")]
            command = [str(spark_submit), "--master", master, *confs,
                       str(REPO / "spark_jobs" / "mirror_level.py"), "--result", str(result_path)]
        started, started_wall = time.monotonic(), time.time()
        proc = subprocess.Popen(command, cwd=REPO, env=spark_env(spec), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        sampler = TreeSampler(proc.pid).start() if sample_memory and not connect_url else None
        out, err = proc.communicate()
        exit_s = time.monotonic() - started
        memory = sampler.stop() if sampler else None
        if proc.returncode != 0 or not result_path.exists():
            raise RuntimeError(f"mirrorflow copy job failed ({proc.returncode}):\n{out[-2000:]}\n{err[-3000:]}")
        result = json.loads(result_path.read_text())
    if result["errors"]:
        raise RuntimeError(f"mirrorflow copy job reported errors: {result['errors']}")
    out_ = {"seconds": result["finished_at"] - started_wall, "exit_s": exit_s, "copied": result["copied"],
            "plan_s": result["plan_s"], "copy_s": result["copy_s"],
            "spark_tasks": result["spark_tasks"],
            # where a slow plan waited (its steps' seconds, per link)
            "plan_steps": [link.get("plan_steps", {}) for link in result.get("links", [])]}
    if memory is not None:
        out_["memory"] = memory
    return out_


def mirrorflow_copy(source: str, target: str, topic: str, *, exactly_once: bool = True, link_id: str = "src.L1",
                    copy_threads: int = DEFAULT_COPY_THREADS, txn_records: int | None = None,
                    master: str = "local[*]", sample_memory: bool = False, connect_url: str | None = None) -> dict:
    """Copy ``topic`` from ``source`` to ``target`` with one level-1 run of the link ``link_id``.

    A fresh ``link_id`` per run starts from an empty checkpoint (the checkpoint group and
    the transactional ids derive from it).
    """
    spec = JobSpec(level=1, run_id=f"bench-{topic}", topics=(topic,),
                   links=(LinkJob(link_id, 1, "src", "dst", txn_records=txn_records, exactly_once=exactly_once),),
                   clusters={"src": {"bootstrap.servers": source}, "dst": {"bootstrap.servers": target}},
                   copy_threads=copy_threads)
    return submit(spec, master=master, sample_memory=sample_memory, connect_url=connect_url)
