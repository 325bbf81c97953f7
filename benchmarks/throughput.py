"""Copy throughput: every contender copies the same pre-filled topic into an empty target topic.

Per case (message size x partitions), the source topic is written once; each
contender then gets a freshly created, empty target topic of the same name and
shape on the target cluster, copies, and is checked afterwards by reading the
target back (``read_committed``): a contender that lost or duplicated records is
reported as such, never silently timed. The brokers' produce ceiling is
measured per case with ``ProducerPerformance`` into a scratch topic of the same
shape on the target cluster.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import Case, create_topic, prefill, records_on
from benchmarks.memory import TreeSampler
from benchmarks.mirrorflow_copy import mirrorflow_copy
from benchmarks.mm2 import fetch as fetch_mm2
from benchmarks.mm2 import recreate_topic, run_mm2
from benchmarks.producer_ceiling import producer_ceiling
from benchmarks.raw_loop import raw_copy
from mirrorflow_dev.kafka import KafkaDistribution

CONTENDERS = ("raw loop", "mirrorflow EOS", "mirrorflow at-least-once", "mirrorflow EOS (Connect)",
              "mirrorflow at-least-once (Connect)", "MM2 EOS", "MM2 at-least-once")
#: mirrorflow's contenders: the level job by spark-submit, and on a Spark Connect server that is already up.
MIRRORFLOW = tuple(name for name in CONTENDERS if name.startswith("mirrorflow"))
SIZES = (100, 1000, 10_000)
PARTITIONS = (1, 8, 64)
#: Records per size: about 100-400 MB per case, so that a contender's fixed start-up
#: (Spark's, MirrorMaker's JVM) is part of the time without dominating it.
RECORDS = {100: 1_000_000, 1000: 300_000, 10_000: 40_000}


#: The raw loop's batching, so the ceiling is the brokers' and not the Java producer's defaults (16 KB, no linger).
CEILING_PROPS = {"batch.size": "1048576", "linger.ms": "5"}
#: About 2 GB per case: where Spark's fixed start-up (about 7 s) has been paid off.
VOLUME = (Case(1000, 8, 2_000_000), Case(10_000, 8, 200_000))


def cases(quick: bool = False) -> list[Case]:
    scale = 10 if quick else 1
    return [Case(size, partitions, RECORDS[size] // scale) for size in SIZES for partitions in PARTITIONS]


def _delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    if topic in admin.list_topics(timeout=10).topics:
        admin.delete_topics([topic], operation_timeout=30)[topic].result()


def measure_case(src: str, dst: str, case: Case, *, progress: Callable[[str], None],
                 contenders: tuple[str, ...] = CONTENDERS, memory_for: str | None = None,
                 rounds: int = 1, connect_url: str | None = None, connect_pid: int | None = None) -> dict[str, Any]:
    """Every contender on one case; returns the case's row with one entry per contender.

    ``rounds`` > 1 runs the contenders that many times, in turn, and keeps each one's
    median run (all its times are in ``rounds_s``): on a machine whose minutes differ by
    half, one run each decides nothing within that margin.

    ``connect_url`` is the Spark Connect server of the ``(Connect)`` contenders; with
    ``memory_for`` set, their run is sampled on the server's process tree (``connect_pid``).
    """
    cores = os.cpu_count() or 1
    topic = create_topic(src, case.partitions)
    prefill_s = prefill(src, topic, case)
    progress(f"{case.size} B x {case.partitions} partitions: {case.records} records written in {prefill_s:.1f}s")
    tries: dict[str, list[dict[str, Any]]] = {}
    for name in [n for _ in range(rounds) for n in contenders]:
        recreate_topic(dst, topic, case.partitions)
        started = time.monotonic()
        if name == "raw loop":
            r = raw_copy(src, dst, topic, case.partitions, case.records)
        elif name.startswith("mirrorflow"):
            on_connect = name.endswith("(Connect)")
            if on_connect and not connect_url:
                raise ValueError(f"{name}: no Spark Connect server to run on")
            sampler = (TreeSampler(connect_pid).start()
                       if on_connect and memory_for and connect_pid and " EOS" in name else None)
            r = mirrorflow_copy(src, dst, topic, exactly_once=" EOS" in name,
                                link_id=f"bench-{uuid.uuid4().hex[:8]}.L1", sample_memory=name == memory_for,
                                connect_url=connect_url if on_connect else None)
            if sampler is not None:
                r["memory"] = sampler.stop()
        else:
            r = run_mm2(src, dst, topic, case.records, tasks_max=cores, exactly_once=name.endswith("EOS"),
                        workdir=Path(".run") / "bench-mm2" / topic, progress=lambda m: None)
        seconds = r["seconds"]
        wall = time.monotonic() - started
        on_target = records_on(dst, topic, case.partitions, timeout=600)
        row = {"seconds": round(seconds, 3), "records_per_s": round(case.records / seconds),
               "mb_per_s": round(case.bytes / seconds / 1e6, 2), "on_target": on_target,
               "lost": max(0, case.records - on_target), "duplicated": max(0, on_target - case.records),
               "wall_s": round(wall, 1)}
        for key in ("plan_s", "plan_steps", "copy_s", "exit_s", "spark_tasks", "memory"):
            if key in r:
                row[key] = r[key]
        if r.get("copy_s"):  # the job's own copy phase, without Spark's start and the planning
            row["copy_records_per_s"] = round(case.records / r["copy_s"])
        tries.setdefault(name, []).append(row)
        progress(f"  {name:26s} {seconds:7.2f}s {row['records_per_s']:>9,} rec/s {row['mb_per_s']:7.1f} MB/s"
                 + ("" if on_target == case.records else f"  ON TARGET {on_target} of {case.records}"))
    runs: dict[str, Any] = {}
    for name, rows in tries.items():
        ordered = sorted(rows, key=lambda r: r["seconds"])
        runs[name] = dict(ordered[(len(ordered) - 1) // 2])  # the median run (the lower one of an even count)
        if len(rows) > 1:
            runs[name]["rounds_s"] = [r["seconds"] for r in rows]
            # every copy of every round must have been exact, not just the median's
            runs[name]["lost"] = max(r["lost"] for r in rows)
            runs[name]["duplicated"] = max(r["duplicated"] for r in rows)
    _delete_topic(dst, topic)

    scratch = create_topic(dst, case.partitions, name=f"bench-ceiling-{uuid.uuid4().hex[:8]}")
    ceiling = producer_ceiling(dst, scratch, case.records, case.size, classpath=KafkaDistribution.fetch().classpath,
                               producer_props=CEILING_PROPS)
    runs["producer ceiling"] = {"seconds": round(case.records / ceiling["records_per_s"], 3),
                                "records_per_s": round(ceiling["records_per_s"]),
                                "mb_per_s": round(ceiling["records_per_s"] * case.size / 1e6, 2),
                                "p99_ms": ceiling["p99_ms"]}
    progress(f"  {'producer ceiling':26s} {runs['producer ceiling']['records_per_s']:>18,} rec/s "
             f"{runs['producer ceiling']['mb_per_s']:7.1f} MB/s")
    _delete_topic(dst, scratch)
    _delete_topic(src, topic)
    return {"size": case.size, "partitions": case.partitions, "records": case.records, "bytes": case.bytes,
            "prefill_s": round(prefill_s, 1), "runs": runs}


def threads_ablation(src: str, dst: str, *, progress: Callable[[str], None], records: int = 100_000,
                     threads: tuple[int, ...] = (1, 2, 4, 8)) -> list[dict[str, Any]]:
    """mirrorflow EOS on one case with each ``replication.copy_threads`` value: what the concurrency buys."""
    out = []
    for partitions in (8, 64):
        case = Case(1000, partitions, records)
        topic = create_topic(src, partitions)
        prefill(src, topic, case)
        for n in threads:
            recreate_topic(dst, topic, partitions)
            r = mirrorflow_copy(src, dst, topic, link_id=f"bench-{uuid.uuid4().hex[:8]}.L1", copy_threads=n)
            if r["copied"] != case.records:
                raise RuntimeError(f"copy_threads={n}: copied {r['copied']} of {case.records}")
            out.append({"partitions": partitions, "records": records, "size": 1000, "copy_threads": n,
                        "seconds": round(r["seconds"], 2), "copy_s": r["copy_s"],
                        "copy_records_per_s": round(records / r["copy_s"])})
            progress(f"copy_threads={n}, {partitions} partitions: {r['seconds']:.1f}s, copy {r['copy_s']:.2f}s")
        _delete_topic(dst, topic)
        _delete_topic(src, topic)
    return out


def mm2_of(name: str) -> str:
    """The MirrorMaker 2 contender a mirrorflow contender is compared with: the same exactly-once setting."""
    return "MM2 EOS" if " EOS" in name else "MM2 at-least-once"


def ratios(row: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per mirrorflow contender: against MirrorMaker 2 (same setting), the raw loop, and its copy phase alone."""
    runs = row["runs"]

    def rate(name: str) -> float | None:
        return runs[name]["records_per_s"] if name in runs else None

    def ratio(x: float | None, y: float | None) -> float | None:
        return round(x / y, 2) if x and y else None

    return {name: {"vs_mm2": ratio(rate(name), rate(mm2_of(name))),
                   "vs_raw": ratio(rate(name), rate("raw loop")),
                   # the copy phase alone (Spark's start and planning left out) against the raw loop
                   "copying": ratio(runs[name].get("copy_records_per_s"), rate("raw loop"))}
            for name in MIRRORFLOW if name in runs}


def prepare(progress: Callable[[str], None]) -> None:
    """Fetch MirrorMaker 2's jars before any clock runs."""
    fetch_mm2(progress=progress)
