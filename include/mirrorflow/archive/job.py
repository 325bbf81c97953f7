"""One archive run: the driver plans from S3 progress, executors write Parquet, the driver commits.

Per archived cluster the driver (the Spark job's main process, or any Python
process for tests) does:

1. read the cluster's progress object from S3 (:mod:`.progress`);
2. list the selected topics' partitions and their earliest and last stable
   offsets (one request each); every partition continues at its progress'
   ``next``, a new one at the source's earliest offset. If retention deleted
   records the archive had not read yet (``next < earliest``) the gap is
   recorded as ``lost`` in the manifest and logged as an error, and the
   partition's coverage restarts at the earliest offset;
3. cap each range by ``max_records_per_run`` and pack the ranges into Spark
   tasks (:func:`mirrorflow.work.pack`).

Executors run :func:`.writer.archive_partition` per range. Then, per cluster,
the driver writes the run's manifest (every partition's range, objects, count,
checksum, loss, error) and only then the new progress. Progress is the commit
point: a run killed before it is simply repeated from the same offsets, which
rewrites the same keys with the same records (see :mod:`.writer`), so there is
never a duplicate row. One audit line per partition (``archive``) and per run
(``archive_run``).

Runs of one archive location must not overlap (the DAG runs one at a time):
two drivers would both read, then both write, the same progress object.

The spec is plain JSON in ``MIRRORFLOW_ARCHIVE_JOB`` (it carries cluster
credentials and maybe S3 keys: in memory and the environment, never a file),
and its ``repr`` hides them.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import TopicPartition

from mirrorflow.archive import layout
from mirrorflow.archive.location import ArchiveLocation
from mirrorflow.archive.progress import Progress, read_progress, write_progress
from mirrorflow.archive.writer import DEFAULT_ROWS_PER_OBJECT, ArchiveTask, archive_partition
from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import audit
from mirrorflow.kafka import ClusterClient, earliest_and_stable, list_topics
from mirrorflow.progress import Progress as Tracker
from mirrorflow.progress import tracking
from mirrorflow.spark import SparkJobResult, SparkJobSpec, parallelism, run_bins
from mirrorflow.topology.model import TopicSelector
from mirrorflow.work import PartitionWork, pack

log = logging.getLogger(__name__)

#: Environment variable that carries the spec into ``spark-submit``.
ARCHIVE_ENV = "MIRRORFLOW_ARCHIVE_JOB"
MANIFEST_VERSION = 1


# --------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class ArchiveSpec(SparkJobSpec, env=ARCHIVE_ENV, kind="archive spec", passed_by="the archive DAG"):
    run_id: str
    #: Cluster name -> librdkafka settings (``bootstrap.servers`` and any credentials).
    clusters: Mapping[str, Mapping[str, Any]] = field(repr=False)
    #: The clusters whose topics are archived (each has its own progress and manifests).
    archived: tuple[str, ...]
    #: Topic patterns (full match; internal topics never selected), as the topology's ``topics``.
    topics: tuple[str, ...]
    location: ArchiveLocation
    #: Spark tasks to pack the work into; ``None``: Spark's default parallelism.
    slots: int | None = None
    #: At most this many records per partition per run (bounds a run's time and memory).
    max_records_per_run: int | None = None
    rows_per_object: int = DEFAULT_ROWS_PER_OBJECT

    def __repr__(self) -> str:
        return (f"ArchiveSpec(run_id={self.run_id!r}, archived={list(self.archived)}, topics={list(self.topics)}, "
                f"location={self.location!r}, clusters=<{len(self.clusters)} hidden>)")

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "clusters": {k: dict(v) for k, v in self.clusters.items()},
            "archived": list(self.archived),
            "topics": list(self.topics),
            "location": self.location.to_dict(),
            "slots": self.slots,
            "max_records_per_run": self.max_records_per_run,
            "rows_per_object": self.rows_per_object,
        }

    @classmethod
    def from_dict(cls, data: Any) -> ArchiveSpec:
        def bad(key: str, problem: str) -> MirrorflowError:
            return cls.invalid(f"{key}: {problem}")

        if not isinstance(data, dict):
            raise bad("(top)", f"expected a JSON object, got {type(data).__name__}")
        for key in ("run_id", "clusters", "archived", "topics", "location"):
            if key not in data:
                raise bad(key, "missing")
        clusters = data["clusters"]
        if not isinstance(clusters, dict) or not all(isinstance(v, dict) for v in clusters.values()):
            raise bad("clusters", "must map cluster names to client settings")
        for key in ("archived", "topics"):
            if not isinstance(data[key], list) or not all(isinstance(x, str) for x in data[key]):
                raise bad(key, "must be a list of strings")
        unknown = [c for c in data["archived"] if c not in clusters]
        if unknown:
            raise bad("archived", f"no client settings for {', '.join(unknown)} (clusters: {', '.join(clusters)})")
        for key in ("slots", "max_records_per_run", "rows_per_object"):
            value = data.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise bad(key, f"must be a positive integer{'' if key == 'rows_per_object' else ' or null'}, "
                               f"got {value!r}")
        extra = sorted(set(data) - {"run_id", "clusters", "archived", "topics", "location", "slots",
                                    "max_records_per_run", "rows_per_object"})
        if extra:
            raise bad(", ".join(extra), "unknown key(s)")
        try:
            location = ArchiveLocation.from_dict(data["location"], where="location")
        except MirrorflowError as exc:
            raise bad("location", str(exc)) from None
        return cls(
            run_id=str(data["run_id"]),
            clusters={k: dict(v) for k, v in clusters.items()},
            archived=tuple(data["archived"]),
            topics=tuple(data["topics"]),
            location=location,
            slots=data.get("slots"),
            max_records_per_run=data.get("max_records_per_run"),
            rows_per_object=data.get("rows_per_object") or DEFAULT_ROWS_PER_OBJECT,
        )


# --------------------------------------------------------------------------- results


@dataclass
class ArchiveResult(SparkJobResult):
    run_id: str
    #: One manifest entry per partition that archived, lost or failed something, with ``cluster``.
    partitions: list[dict[str, Any]] = field(default_factory=list)
    #: Cluster -> key of the manifest this run wrote.
    manifests: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    plan_s: float = 0.0
    archive_s: float = 0.0
    tasks: int = 0

    @property
    def count(self) -> int:
        return sum(p["count"] for p in self.partitions if not p["error"])

    @property
    def lost(self) -> list[dict[str, Any]]:
        return [{"cluster": p["cluster"], "topic": p["topic"], "partition": p["partition"], "lost": p["lost"]}
                for p in self.partitions if p["lost"]]

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "archived": self.count,
            "objects": sum(len(p["objects"]) for p in self.partitions if not p["error"]),
            "partitions": len(self.partitions),
            "lost": self.lost,
            "manifests": self.manifests,
            "spark_tasks": self.tasks,
            "plan_s": round(self.plan_s, 3),
            "archive_s": round(self.archive_s, 3),
            "errors": list(self.errors),
        }

    def details(self) -> dict[str, Any]:
        return {"partition_details": self.partitions}


# --------------------------------------------------------------------------- planning (driver)


@dataclass
class PartitionPlan:
    cluster: str
    topic: str
    partition: int
    #: Where this run starts, and its exclusive planned end (capped by the per-run limit).
    start: int
    end: int
    #: Where the partition's contiguous coverage began (progress' ``first`` after this run).
    first: int
    #: ``[from, to)`` the source deleted before the archive read it, if any.
    lost: tuple[int, int] | None = None
    new: bool = False
    error: str | None = None


@dataclass
class ClusterPlan:
    cluster: str
    progress: Progress
    partitions: list[PartitionPlan] = field(default_factory=list)


def plan_cluster(spec: ArchiveSpec, cluster: str, selector: TopicSelector, s3: Any,
                 timeout: float = 30.0) -> ClusterPlan:
    """Read progress and offsets and decide each selected partition's range for this run."""
    source = spec.client(cluster)
    progress = read_progress(spec.location, cluster, s3=s3)
    plan = ClusterPlan(cluster, progress)
    topics = {t: n for t, n in list_topics(source, timeout).items() if selector.selects(t)}
    tps = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    if not tps:
        return plan
    lows, ends = earliest_and_stable(source, tps, timeout)
    for tp in tps:
        low, stable = lows[(tp.topic, tp.partition)], ends[(tp.topic, tp.partition)]
        known = progress.get(tp.topic, {}).get(str(tp.partition))
        pp = PartitionPlan(cluster, tp.topic, tp.partition, start=low, end=stable, first=low)
        if known is None:
            pp.new = True
            if low > 0:
                pp.lost = (0, low)
                log.info("archive %s %s[%d]: first run; offsets below %d were deleted from the source before "
                         "the archive started (recorded as lost)", cluster, tp.topic, tp.partition, low)
        elif known["next"] > stable:
            pp.error = (f"archive progress of {cluster} {tp.topic}[{tp.partition}] is at offset {known['next']} but "
                        f"the source ends at {stable}: the topic was recreated or truncated. Refusing to archive "
                        f"over the existing archive; move it (another prefix) or remove this partition's entry "
                        f"from {layout.progress_key(spec.location.prefix, cluster)}")
            pp.start = pp.end = known["next"]
        elif known["next"] < low:
            pp.lost = (known["next"], low)
            log.error("ARCHIVE GAP: %s %s[%d]: offsets %d..%d were deleted by the source (retention) before they "
                      "were archived; %d records lost to the archive, which continues at %d", cluster, tp.topic,
                      tp.partition, known["next"], low - 1, low - known["next"], low)
        else:
            pp.start, pp.first = known["next"], known["first"]
        if pp.error is None and spec.max_records_per_run is not None:
            pp.end = min(pp.end, pp.start + spec.max_records_per_run)
        plan.partitions.append(pp)
    return plan


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
    tasks = {(pp.cluster, pp.topic, pp.partition): ArchiveTask(
        pp.cluster, pp.topic, pp.partition, pp.start, pp.end, run_id=spec.run_id,
        max_records=spec.max_records_per_run, rows_per_object=spec.rows_per_object)
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
    audit("archive_run", run_id=spec.run_id, location=spec.location.uri, clusters=list(spec.archived),
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
        audit("archive", run_id=spec.run_id, cluster=plan.cluster, topic=entry["topic"],
              partition=entry["partition"], offsets=[entry["start"], entry["next"]], count=entry["count"],
              bytes=entry["bytes"], objects=len(entry["objects"]), checksum=entry["checksum"], lost=entry["lost"],
              manifest=manifest_key, location=spec.location.uri, error=entry["error"],
              duration_s=entry["duration_s"])
