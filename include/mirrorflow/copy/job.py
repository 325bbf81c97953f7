"""One micro-batch of one level: the driver plans, Spark executors copy, the driver audits.

The driver plans every link (:mod:`mirrorflow.copy.plan`), packs the partition
ranges into Spark tasks of similar size (:mod:`mirrorflow.work`) and hands them to
the executors (:func:`mirrorflow.copy.engine.execute`), which run
:func:`mirrorflow.copy.engine.partition.copy_partition` for each range; it
fences, re-reads the checkpoint and copies exactly once. One partition's
failure is reported in its result and never stops the others. The driver then
logs one journal line per partition and returns a :class:`~mirrorflow.copy.spec.JobResult`.

The job is described by a :class:`~mirrorflow.copy.spec.JobSpec` (:mod:`mirrorflow.copy.spec`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

from mirrorflow.copy.engine.executor import execute, passed
from mirrorflow.copy.plan.level import plan
from mirrorflow.copy.spec import JobResult, JobSpec, LinkJob, PartitionError, link_fields
from mirrorflow.copy.txn_groups import txn_unit
from mirrorflow.journal import journal_entry, journal_warning
from mirrorflow.progress import Progress
from mirrorflow.spark import parallelism
from mirrorflow.topology.windows import next_opening
from mirrorflow.work import pack

log = logging.getLogger(__name__)


def run_job(spec: JobSpec, spark: Any = None) -> JobResult:
    """Plan, copy, write the journal. ``spark=None`` copies in this process (dry runs, small tests).

    ``spark`` may be a session still opening (a ``Future``, :func:`mirrorflow.spark.opening`):
    the plan is made meanwhile, and waits for it only to share out the links' rate caps.
    """
    result = JobResult(spec.level, spec.run_id)
    slots_known: list[int] = []

    def slots() -> int:
        if not slots_known:
            slots_known.append(spec.slots or parallelism(spark.result() if isinstance(spark, Future) else spark))
        return slots_known[0]

    started = time.monotonic()
    plans = plan(spec, slots)
    if isinstance(spark, Future):
        spark = spark.result()
    by_link = {p.link.link_id: p for p in plans}
    tasks_by_key = {(t.link_id, t.topic, t.partition): t for p in plans for t in p.tasks}
    works = [w for p in plans for w in p.works]
    packed = pack(works, slots(), unit=txn_unit)
    bins = [[tasks_by_key[(w.link_id, w.topic, w.partition)] for w in bin_] for bin_ in packed]
    result.tasks = len(bins)
    result.plan_s = time.monotonic() - started
    for p in plans:
        result.links.append(p.report)
        result.errors.extend(p.errors)
        log.info("plan %s: %s -> %s, %d partitions, %d offsets to read%s (%s)", p.link.link_id, p.link.source,
                 p.link.target, p.report.partitions, p.report.planned_records,
                 f", created {p.report.created_topics}" if p.report.created_topics else "",
                 ", ".join(f"{k} {v:.2f}s" for k, v in p.report.plan_steps.items()) or "nothing to plan")
    log.info("level %d run %s: %d partition ranges in %d Spark tasks (planned in %.2fs)", spec.level,
             spec.run_id, len(works), len(bins), result.plan_s)

    started = time.monotonic()
    progress = Progress(f"level {spec.level} run {spec.run_id}", sum(t.planned_records for b in bins for t in b),
                        fields={"job": "level", "run_id": spec.run_id, "level": spec.level})
    results = execute(spark, spec, bins, progress)
    progress.finish(passed(results), sum(r["bytes"] for r in results))
    result.copy_s = time.monotonic() - started
    result.finished_at = time.time()
    for r in sorted(results, key=lambda r: (r["link_id"], r["topic"], r["partition"])):
        result.partitions.append(r)
        p = by_link[r["link_id"]]
        p.report.copied += r["copied"]
        p.report.skipped += r["skipped"]
        p.report.bytes += r["bytes"]
        _audit_partition(spec, p.link, r)
        if r["error"]:
            result.errors.append(PartitionError(r["link_id"], r["source"], r["target"], r["topic"], r["partition"],
                                                r["error_offset"], r["error"]))
    closed = [r for r in result.partitions if r.get("window_closed")]
    if closed:
        _window_closed(spec, by_link, closed)
    journal_entry("copy_run", run_id=spec.run_id, level=spec.level, links=len(result.links), copied=result.copied,
                  partitions=len(result.partitions), errors=[str(e) for e in result.errors],
                  plan_s=round(result.plan_s, 3), copy_s=round(result.copy_s, 3))
    return result


def _window_closed(spec: JobSpec, by_link: Mapping[str, Any], closed: Sequence[Mapping[str, Any]]) -> None:
    """Where each partition stopped when its link's window closed, and when the next window opens."""
    now = datetime.now(UTC)
    for link_id in sorted({r["link_id"] for r in closed}):
        link = by_link[link_id].link
        opens = next_opening(link.parsed_windows(), now) if link.windows else None
        stopped = {f"{r['topic']}[{r['partition']}]": r["next_offset"] for r in closed if r["link_id"] == link_id}
        log.info("%s: its replication window closed during the run; the copy committed what it had read and "
                 "stopped at %s; the rest waits for the next window, opening %s", link_id,
                 ", ".join(f"{tp} offset {offset}" for tp, offset in sorted(stopped.items())),
                 opens.isoformat() if opens else "unknown")
        journal_entry("window_closed", run_id=spec.run_id, level=spec.level, link=link_fields(link), stopped_at=stopped,
                      next_window=opens.isoformat() if opens else None, windows=list(link.windows))


def _audit_partition(spec: JobSpec, link: LinkJob, r: Mapping[str, Any]) -> None:
    journal_entry(
        "copy",
        run_id=spec.run_id,
        link=link_fields(link),
        topic=r["topic"],
        partition=r["partition"],
        source_offsets=[r["start_offset"], r["next_offset"]],
        target_offsets=[r["target_first_offset"], r["target_last_offset"]],
        copied=r["copied"],
        skipped=r["skipped"],
        malformed=r["malformed"],
        bytes=r["bytes"],
        checksum=f"crc32:{r['checksum']:08x}",
        exactly_once=link.exactly_once,
        transactions=r["transactions"],
        duration_s=r["duration_s"],
        throttled_s=r.get("throttled_s", 0.0),
        retimed=r.get("retimed", 0),
        lost_to_retention=r["lost_to_retention"],
        restored=r.get("restored", 0),
        set_aside=r.get("set_aside"),
        kept_alive=r.get("kept_alive", False),
        error=r["error"],
    )
    if r.get("diverged_at") is not None:
        journal_warning("truncated", run_id=spec.run_id, link=link_fields(link), topic=r["topic"],
                        partition=r["partition"], checkpoint=r["start_offset"], diverged_at=r["diverged_at"])
    lost_ranges = r.get("lost_ranges") or ([r["lost_offsets"]] if r.get("lost_offsets") else [])
    for i, (first, last) in enumerate(lost_ranges):  # a gap at the start, then any opened while the copy ran
        stopped = r["error"] is not None and i == len(lost_ranges) - 1 and r.get("error_offset") == first
        journal_warning(
            "gap",
            run_id=spec.run_id,
            link=link_fields(link),
            topic=r["topic"],
            partition=r["partition"],
            lost_offsets=[first, last],
            lost=last - first + 1,
            on_gap=link.on_gap,
            found="at the start" if i == 0 and r["start_offset"] in (first, last + 1) else "while copying",
            action=("stopped: nothing copied past the gap" if stopped
                    else "skipped: copied on from the source's first offset"),
        )
    if r.get("restored_offsets"):
        first, last = r["restored_offsets"]
        journal_warning("gap", run_id=spec.run_id, link=link_fields(link), topic=r["topic"], partition=r["partition"],
                        lost_offsets=[first, last], lost=0, on_gap=link.on_gap, restored=r["restored"],
                        action=f"restored from the archive of {link.source}; copied on from Kafka"
                        + (f" (stopped: {r['error']})" if r["error"] else ""))
