"""Fixed cost of a micro-batch and how planning grows with the partition count.

- **Empty micro-batch**: the level job with nothing to copy, alone (``spark-submit``
  from start to exit: Spark's start, planning, the job's end) and as Airflow runs
  it (``mirror_level_1`` under ``dag.test()``: the DAG run, and each task); with a
  Spark Connect server, the same two: a fresh client process from start to exit,
  and the DAG run on a ``spark_connect`` connection.
- **Planning**: the driver's planning step (:func:`mirrorflow.copy.plan.plan`: topic
  shapes on the target, source partitions, checkpoints, end offsets, packing) for
  100, 1,000 and 10,000 partitions spread over topics of 100 partitions, each
  partition holding one record so that every partition becomes work. The first
  plan creates every topic on the target; the second is the steady state.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.common import Case, create_topic, prefill
from benchmarks.mirrorflow_copy import mirrorflow_copy
from mirrorflow.copy.plan import plan
from mirrorflow.copy.spec import JobSpec, LinkJob

TOPIC_PARTITIONS = 100
_pause = threading.Event()  # never set: .wait(t) is a polling interval with a deadline around it


def _airflow_runs(src: str, dst: str, topic: str, runs: int, connect_url: str | None) -> list[dict[str, Any]]:
    command = [sys.executable, "-m", "benchmarks.airflow_batch", src, dst, topic, "--runs", str(runs)]
    proc = subprocess.run(command + (["--connect", connect_url] if connect_url else []), capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmarks.airflow_batch failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["runs"]


def empty_batch(src: str, dst: str, *, runs: int, progress: Callable[[str], None],
                connect_url: str | None = None) -> dict[str, Any]:
    topic = create_topic(src, 8)
    prefill(src, topic, Case(100, 8, 1000))
    link = f"bench-{uuid.uuid4().hex[:8]}.L1"
    mirrorflow_copy(src, dst, topic, link_id=link)  # copies the 1,000 records; what follows is empty

    def alone(label: str, connect_url: str | None = None) -> list[dict[str, Any]]:
        out = []
        for i in range(runs):
            r = mirrorflow_copy(src, dst, topic, link_id=link, sample_memory=i == 0 and not connect_url,
                                connect_url=connect_url)
            if r["copied"]:
                raise RuntimeError(f"an empty batch copied {r['copied']} records")
            out.append(r)
            progress(f"empty batch, {label}: {r['exit_s']:.2f}s to exit (plan {r['plan_s']:.2f}s)")
        return out

    spark = alone("spark-submit")
    airflow = _airflow_runs(src, dst, topic, runs, None)
    for a in airflow:
        progress(f"empty batch, dag.test(): {a['dag_run_s']:.1f}s, tasks {a['tasks_s']}")
    connect: dict[str, Any] = {}
    if connect_url:
        client = alone("Spark Connect client", connect_url)
        on_airflow = _airflow_runs(src, dst, topic, runs, connect_url)
        for a in on_airflow:
            progress(f"empty batch, dag.test() on Spark Connect: {a['dag_run_s']:.1f}s, tasks {a['tasks_s']}")
        connect = {"client_s": _median(r["exit_s"] for r in client), "plan_s": _median(r["plan_s"] for r in client),
                   "dag_run_s": _median(a["dag_run_s"] for a in on_airflow),
                   "copy_task_s": _median(a["tasks_s"].get("copy", 0.0) for a in on_airflow),
                   "plan_task_s": _median(a["tasks_s"].get("plan", 0.0) for a in on_airflow)}
    return {
        "spark_submit_s": _median(r["exit_s"] for r in spark),  # a whole micro-batch: Spark's stop included
        "plan_s": _median(r["plan_s"] for r in spark),
        "memory": spark[0]["memory"],
        "dag_run_s": _median(a["dag_run_s"] for a in airflow),
        "copy_task_s": _median(a["tasks_s"].get("copy", 0.0) for a in airflow),
        "plan_task_s": _median(a["tasks_s"].get("plan", 0.0) for a in airflow),
        "runs": runs,
        **({"connect": connect} if connect else {}),
    }


def planning(src: str, dst: str, partitions: int, *, progress: Callable[[str], None]) -> dict[str, Any]:
    prefix = f"bench-plan-{uuid.uuid4().hex[:6]}"
    topics = [f"{prefix}-{i:03d}" for i in range(max(1, partitions // TOPIC_PARTITIONS))]
    per_topic = min(partitions, TOPIC_PARTITIONS)
    admin = AdminClient({"bootstrap.servers": src, "log_level": 3})
    started = time.monotonic()
    for i in range(0, len(topics), 10):  # a KRaft controller refuses 10,000 partitions in one request
        batch = [NewTopic(t, per_topic, 1) for t in topics[i:i + 10]]
        for future in admin.create_topics(batch, operation_timeout=120).values():
            future.result()
    _wait_for_leaders(admin, topics, per_topic)
    producer = Producer({"bootstrap.servers": src, "linger.ms": 20})
    for t in topics:
        for p in range(per_topic):
            producer.produce(t, b"x", partition=p)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("planning benchmark: records not acknowledged")
    progress(f"planning: {len(topics)} topics x {per_topic} partitions ready in {time.monotonic() - started:.1f}s")
    spec = JobSpec(level=1, run_id="bench-plan", topics=(f"{prefix}-.*",),
                   links=(LinkJob(f"bench-{uuid.uuid4().hex[:8]}.L1", 1, "src", "dst"),),
                   clusters={"src": {"bootstrap.servers": src}, "dst": {"bootstrap.servers": dst}})
    out: dict[str, Any] = {"partitions": len(topics) * per_topic, "topics": len(topics)}
    for attempt in ("first_s", "steady_s"):
        started = time.monotonic()
        plans = plan(spec, slots=2)
        out[attempt] = round(time.monotonic() - started, 3)
        errors = [e for p in plans for e in p.errors]
        works = sum(len(p.works) for p in plans)
        if errors or works != out["partitions"]:
            raise RuntimeError(f"planning {out['partitions']} partitions: {works} planned, errors {errors[:3]}")
    progress(f"planning {out['partitions']} partitions: first {out['first_s']:.2f}s (creates the target topics), "
             f"steady {out['steady_s']:.2f}s")
    for bootstrap in (src, dst):
        client = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        for future in client.delete_topics(topics, operation_timeout=120).values():
            future.result()
    return out


def _wait_for_leaders(admin: AdminClient, topics: list[str], partitions: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    pending = set(topics)
    while pending:
        md = admin.list_topics(timeout=30).topics
        pending = {t for t in pending if t not in md or md[t].error is not None or len(md[t].partitions) != partitions
                   or any(p.leader < 0 for p in md[t].partitions.values())}
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} topics without leaders after {timeout:.0f}s")
        if pending:
            _pause.wait(0.2)  # polling interval of the condition above, which has a deadline


def _median(values) -> float:
    return round(statistics.median(list(values)), 3)
