"""One archive run: the driver plans from S3 progress, executors write Parquet, the driver commits.

The driver plans every archived cluster (:mod:`mirrorflow.archive.plan`), packs
the partition ranges into Spark tasks (:func:`mirrorflow.work.pack`) and hands
them to the executors, which run :func:`.writer.archive_partition` per range.
Then, per cluster, the driver writes the run's manifest (every partition's
range, objects, count, checksum, loss, error) and only then the new progress.
Progress is the commit point: a run killed before it is simply repeated from
the same offsets, which rewrites the same keys with the same records (see
:mod:`.writer`), so there is never a duplicate row. One journal line per
partition (``archive``) and per run (``archive_run``).

Runs of one archive location must not overlap (the DAG runs one at a time):
two drivers would both read, then both write, the same progress object.

The job is described by an :class:`~mirrorflow.archive.spec.ArchiveSpec`
(:mod:`mirrorflow.archive.spec`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from mirrorflow import formats
from mirrorflow.archive import layout
from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.archive.plan import ClusterPlan, PartitionPlan, plan_cluster
from mirrorflow.archive.progress import write_progress
from mirrorflow.archive.spec import ArchiveResult, ArchiveSpec
from mirrorflow.archive.writer import ArchiveTask, archive_partition
from mirrorflow.journal import journal_entry
from mirrorflow.kafka import ClusterClient
from mirrorflow.progress import Progress as Tracker
from mirrorflow.progress import tracking
from mirrorflow.spark import parallelism, run_bins
from mirrorflow.topology.model import TopicSelector
from mirrorflow.work import PartitionWork, pack

log = logging.getLogger(__name__)

MANIFEST_VERSION = formats.FORMATS["archive"].version


# --------------------------------------------------------------------------- archiving (executors)


def archive_tasks(clusters: Mapping[str, Mapping[str, Any]], location: Mapping[str, Any],
                  tasks: Iterable[ArchiveTask]) -> Iterator[dict[str, Any]]:
    """Executor side: one result dict per task (errors included, never raised)."""
    where = ArchiveLocation.from_dict(location)
    s3 = where.client()
    clients = {name: ClusterClient(name, dict(settings)) for name, settings in clusters.items()}
    for task in tasks:
        yield archive_partition(task, clients[task.cluster], where, s3=s3)


def _archive_bins(clusters: Mapping[str, Mapping[str, Any]], location: Mapping[str, Any],
                  bins: Iterator[list[ArchiveTask]]) -> Iterator[dict[str, Any]]:
    for tasks in bins:
        yield from archive_tasks(clusters, location, tasks)


def execute(spark: Any, spec: ArchiveSpec, bins: list[list[ArchiveTask]], progress: Tracker | None = None
            ) -> list[dict[str, Any]]:
    """Run the bins as Spark tasks (one bin, one task), or in this process when ``spark`` is ``None``.

    ``progress``: in this process the writer counts every consumed batch into it
    (:func:`mirrorflow.progress.note`); on Spark it follows the finished Spark tasks.
    """
    if not bins:
        return []
    clusters = {name: dict(settings) for name, settings in spec.clusters.items()}
    location = spec.location.to_dict()
    if spark is None:
        with tracking(progress), (progress.running() if progress is not None else contextlib.nullcontext()):
            return [r for tasks in bins for r in archive_tasks(clusters, location, tasks)]
    return run_bins(spark, functools.partial(_archive_bins, clusters, location), bins,
                    f"mirrorflow archive run {spec.run_id}: {sum(map(len, bins))} partitions", progress)


# --------------------------------------------------------------------------- the run


def run_archive(spec: ArchiveSpec, spark: Any = None) -> ArchiveResult:
    """Plan, archive, write manifests, then progress; audit. ``spark=None`` archives in this process."""
    result = ArchiveResult(spec.run_id)
    started_at = datetime.now(UTC)
    started = time.monotonic()
    s3 = spec.location.client()
    selector = TopicSelector(spec.topics)
    plans: list[ClusterPlan] = []
    for cluster in spec.archived:
        try:
            plans.append(plan_cluster(spec, cluster, selector, s3))
        except Exception as exc:  # one cluster (or its progress) failing leaves the others to run
            result.errors.append(f"cluster {cluster}: planning failed: {type(exc).__name__}: {exc}")
            log.error("archive %s: planning failed: %s", cluster, exc)
    clients = {c: spec.client(c) for c in spec.archived}
    tasks = {(pp.cluster, pp.topic, pp.partition): ArchiveTask(
        pp.cluster, pp.topic, pp.partition, pp.start, pp.end, run_id=spec.run_id,
        max_records=spec.max_records_per_run, rows_per_object=spec.rows_per_object,
        name=clients[pp.cluster].renamed(pp.topic))
        for plan in plans for pp in plan.partitions if pp.error is None and pp.start < pp.end}
    works = [PartitionWork(t.cluster, t.topic, t.partition, t.start, t.end) for t in tasks.values()]
    slots = spec.slots or parallelism(spark)
    bins = [[tasks[(w.link_id, w.topic, w.partition)] for w in bin_] for bin_ in pack(works, slots)]
    result.tasks = len(bins)
    result.plan_s = time.monotonic() - started
    log.info("archive run %s: %d partition ranges of %s in %d Spark tasks (planned in %.2fs) to %s", spec.run_id,
             len(works), ", ".join(spec.archived), len(bins), result.plan_s, spec.location.uri)

    started = time.monotonic()
    progress = Tracker(f"archive run {spec.run_id}", sum(t.end - t.start for t in tasks.values()),
                        fields={"job": "archive", "run_id": spec.run_id, "clusters": list(spec.archived)})
    executed = execute(spark, spec, bins, progress)
    progress.finish(sum(r["next"] - r["start"] for r in executed), sum(r["bytes"] for r in executed))
    results = {(r["cluster"], r["topic"], r["partition"]): r for r in executed}
    result.archive_s = time.monotonic() - started
    for plan in plans:
        _commit(spec, plan, results, started_at, s3, result)
    journal_entry("archive_run", run_id=spec.run_id, location=spec.location.uri, clusters=list(spec.archived),
                  partitions=len(result.partitions), archived=result.count,
                  objects=sum(len(p["objects"]) for p in result.partitions if not p["error"]),
                  lost=result.lost, manifests=result.manifests, errors=result.errors,
                  plan_s=round(result.plan_s, 3), archive_s=round(result.archive_s, 3))
    return result


def _entry(pp: PartitionPlan, r: Mapping[str, Any] | None) -> dict[str, Any]:
    """The manifest's record of one partition in this run (``next == start`` when nothing was committed)."""
    error = pp.error or (r["error"] if r else None)
    entry: dict[str, Any] = {
        "topic": pp.topic, "partition": pp.partition, "first": pp.first, "start": pp.start,
        "next": pp.start, "end": pp.end, "count": 0, "bytes": 0, "checksum": "crc32:00000000",
        "objects": [], "lost": list(pp.lost) if pp.lost else None, "error": error, "duration_s": 0.0,
    }
    if r is not None:
        entry["duration_s"] = r["duration_s"]
        if error:
            # uploaded but not vouched for: the next run rewrites (or ignores) them
            entry["uncommitted_objects"] = [o["key"] for o in r["objects"]]
        else:
            entry.update(next=r["next"], count=r["count"], bytes=r["bytes"], checksum=f"crc32:{r['checksum']:08x}",
                         objects=r["objects"])
    return entry


def _unused_manifest_key(spec: ArchiveSpec, cluster: str, started_at: datetime, s3: Any) -> str:
    """The run's manifest key, with ``.2``, ``.3``... appended if a manifest already has it.

    A retry of the same run id within the same second would otherwise replace
    the manifest of an attempt that committed, and with it that attempt's
    coverage and the only list of its objects.
    """
    from botocore.exceptions import ClientError

    base = layout.manifest_key(spec.location.prefix, cluster, started_at, spec.run_id)
    candidate, n = base, 1
    while True:
        try:
            s3.head_object(Bucket=spec.location.bucket, Key=candidate)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return candidate
            raise
        n += 1
        candidate = f"{base[:-len('.json')]}.{n}.json"


def _commit(spec: ArchiveSpec, plan: ClusterPlan, results: Mapping[tuple[str, str, int], Mapping[str, Any]],
            started_at: datetime, s3: Any, result: ArchiveResult) -> None:
    """Write the cluster's manifest, then its progress; audit each partition."""
    progress = copy.deepcopy(plan.progress)
    changed = False
    entries = []
    for pp in plan.partitions:
        r = results.get((pp.cluster, pp.topic, pp.partition))
        entry = _entry(pp, r)
        if entry["error"] is None:
            slot = progress.setdefault(pp.topic, {}).get(str(pp.partition))
            wanted = {"first": pp.first, "next": entry["next"]}
            if slot != wanted:
                progress[pp.topic][str(pp.partition)] = wanted
                changed = True
        if r is not None or entry["lost"] or entry["error"]:
            entries.append(entry)
    manifest_key: str | None = None
    if entries:
        manifest = {
            "version": MANIFEST_VERSION, "run_id": spec.run_id, "cluster": plan.cluster,
            "started": started_at.isoformat(), "finished": datetime.now(UTC).isoformat(),
            "location": spec.location.uri, "partitions": entries,
        }
        try:
            manifest_key = _unused_manifest_key(spec, plan.cluster, started_at, s3)
            s3.put_object(Bucket=spec.location.bucket, Key=manifest_key, ContentType="application/json",
                          Body=json.dumps(manifest, sort_keys=True, indent=1).encode())
            result.manifests[plan.cluster] = manifest_key
        except Exception as exc:
            changed = False  # without its manifest the run is not committed: the next one repeats it
            what = manifest_key or f"of run {spec.run_id}"
            result.errors.append(f"cluster {plan.cluster}: writing manifest {what} failed (nothing of this run "
                                 f"is committed; the next run repeats it): {type(exc).__name__}: {exc}")
            log.error("archive %s: writing manifest %s failed: %s", plan.cluster, what, exc)
            manifest_key = None
    if changed:
        try:
            write_progress(spec.location, plan.cluster, progress, s3=s3)
        except Exception as exc:
            result.errors.append(f"cluster {plan.cluster}: writing progress failed (the next run repeats this "
                                 f"one's ranges, overwriting the same objects): {type(exc).__name__}: {exc}")
            log.error("archive %s: writing progress failed: %s", plan.cluster, exc)
    for entry in entries:
        result.partitions.append({"cluster": plan.cluster, **entry})
        if entry["error"]:
            result.errors.append(f"archive {plan.cluster} {entry['topic']}[{entry['partition']}] at offset "
                                 f"{entry['start']}: {entry['error']}")
        journal_entry("archive", run_id=spec.run_id, cluster=plan.cluster, topic=entry["topic"],
                      partition=entry["partition"], offsets=[entry["start"], entry["next"]], count=entry["count"],
                      bytes=entry["bytes"], objects=len(entry["objects"]), checksum=entry["checksum"],
                      lost=entry["lost"], manifest=manifest_key, location=spec.location.uri, error=entry["error"],
                      duration_s=entry["duration_s"])
