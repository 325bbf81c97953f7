"""How a job's bins of work reach Spark: a SparkContext (``spark-submit``) or a Spark Connect session.

Every mirrorflow job (level copy, onboarding backfill, archive) plans on its
driver and hands Spark a list of bins, one Spark task each; a task runs a
function over its bins and yields one result dict per partition. This module is
the one place that knows the two ways to do that:

- a classic ``SparkContext`` (what ``spark-submit`` gives the entry points in
  ``spark_jobs/``): ``parallelize(bins).mapPartitions(fn)``;
- a Spark Connect session (``sc://`` URL, a long-running Spark Connect server):
  the RDD API does not exist there, so the bins travel in the function's closure
  and a one-row-per-task ``range`` is mapped with ``mapInArrow``, each task
  yielding its results as JSON strings.

Why Connect at all: a ``spark-submit`` per micro-batch starts two JVMs, a
SparkContext and Python workers every time, about 5 s before the first record
moves (docs/benchmarks.md). A Connect server is started once; its Python workers
are kept between jobs of the same session (``spark.python.worker.reuse``), so a
micro-batch costs the client's connection, the driver's planning and the copy.

Progress (:mod:`mirrorflow.progress`): the driver learns a task's results only
when the task ends, so while a job runs its progress is the share of its Spark
tasks that finished, as Spark itself reports it: a SparkContext's status tracker
(polled by the progress ticker, for the job group this module sets) or a Connect
session's progress handler (the server streams its stages' task counts to the
client while ``collect`` waits).

Executors import this module by reference (the Connect path's task function
lives here), and with it the package's face, so neither imports anything heavy
at module level.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from mirrorflow.progress import Progress

log = logging.getLogger(__name__)

#: The column a Connect task's results come back in (one JSON object per row).
RESULT_COLUMN = "result"

#: One bin of a job's work: what a Spark task is given (the job's own type, picklable).
Bin = TypeVar("Bin")


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (pyspark's client classes live in ``pyspark.sql.connect``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_context(spark: Any) -> Any:
    """The SparkContext of ``spark``, which may be a SparkSession (tests) or a SparkContext (the entry points)."""
    return getattr(spark, "sparkContext", spark)


def parallelism(spark: Any) -> int:
    """How many Spark tasks run at once: the bins to pack a job's work into.

    A SparkContext knows (``defaultParallelism``). A Connect client does not see the
    cluster, so it asks the server's settings: ``spark.default.parallelism`` when set
    (``python -m mirrorflow_dev.spark connect-server`` sets it), else the core count of a
    ``local[N]`` master; otherwise 2, said in the log (set the job's ``slots``).
    """
    if spark is None:
        return 1
    if not is_connect(spark):
        return spark_context(spark).defaultParallelism
    conf = spark.conf
    value = conf.get("spark.default.parallelism", None)
    if value:
        return max(1, int(value))
    master = conf.get("spark.master", None) or ""
    match = re.fullmatch(r"local\[(\*|\d+)(?:,\s*\d+)?\]", master)
    if match:
        return (os.cpu_count() or 1) if match.group(1) == "*" else max(1, int(match.group(1)))
    if master == "local":
        return 1
    log.warning("Spark Connect server with master %r does not say its parallelism (spark.default.parallelism); "
                "packing the work into 2 Spark tasks", master or "unknown")
    return 2


def run_bins(spark: Any, fn: Callable[[Iterator[Bin]], Iterator[dict[str, Any]]], bins: list[Bin],
             description: str, progress: Progress | None = None) -> list[dict[str, Any]]:
    """Run ``fn`` over each bin as one Spark task; every result dict, in no particular order.

    ``fn`` takes an iterator of bins and yields result dicts (what ``mapPartitions``
    is given on a SparkContext). It must be picklable by reference: a module-level
    function, or a ``functools.partial`` of one. ``progress``: told the finished
    Spark tasks while the job runs (see the module); its lines come from a ticker.
    """
    if not bins:
        return []
    if not is_connect(spark):
        sc = spark_context(spark)
        # A job group of its own, so that the status tracker finds this job's stages and no other's.
        group = f"mirrorflow-{uuid.uuid4().hex}"
        sc.setJobGroup(group, description)
        if progress is None:
            return sc.parallelize(bins, len(bins)).mapPartitions(fn).collect()
        progress.on_spark()

        def poll() -> None:
            done, total = _classic_tasks(sc, group)
            if total:
                progress.tasks(done, total)

        with progress.running(poll):
            out = sc.parallelize(bins, len(bins)).mapPartitions(fn).collect()
        # Not Spark's count once more: its status store is updated asynchronously and may lag; every
        # task's results are here, so all of them finished.
        progress.tasks_ended(len(bins))
        return out
    # One row (the bin's index) per partition: range() splits evenly, and nothing shuffles.
    frame = spark.range(0, len(bins), 1, len(bins))
    query = frame.mapInArrow(functools.partial(_arrow_bins, fn, bins), f"{RESULT_COLUMN} string")
    if progress is None:
        rows = query.collect()
    else:
        progress.on_spark()
        handler = _ConnectTasks(progress)
        register = getattr(spark, "registerProgressHandler", None)
        if register is None:
            log.info("this Spark Connect client reports no task progress (registerProgressHandler needs "
                     "pyspark 4); progress of %s is known when the job ends", progress.what)
        else:
            register(handler)
        try:
            with progress.running():
                rows = query.collect()
        finally:
            if register is not None:
                spark.removeProgressHandler(handler)
        # The server's last report may predate its last task's end; the results of every task are here.
        progress.tasks_ended(len(bins))
    return [json.loads(row[RESULT_COLUMN]) for row in rows]


def _classic_tasks(sc: Any, group: str) -> tuple[int, int]:
    """Finished and all tasks of the stages of job group ``group``, from the SparkContext's status tracker."""
    tracker = sc.statusTracker()
    done = total = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in (job.stageIds if job is not None else ()):
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                done += stage.numCompletedTasks
                total += stage.numTasks
    return done, total


class _ConnectTasks:
    """A Spark Connect progress handler: the stages' task counts the server streams during ``collect``.

    The server sends them every ``spark.connect.progress.reportInterval`` (2 s by
    default) and once more when the query ends; the client calls this on the thread
    that waits in ``collect``.
    """

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def __call__(self, stages: Any, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
        stages = list(stages or ())
        total = sum(s.num_tasks for s in stages)
        if total:
            self.progress.tasks(sum(s.num_completed_tasks for s in stages), total)


def _arrow_bins(fn: Callable[[Iterator[Bin]], Iterator[dict[str, Any]]], bins: list[Bin],
                batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side of the Connect path: the bins whose indexes this task was given, through ``fn``."""
    import pyarrow as pa

    for batch in batches:
        for index in batch.column(0).to_pylist():
            results = [json.dumps(r, default=str) for r in fn(iter([bins[index]]))]
            yield pa.RecordBatch.from_pydict({RESULT_COLUMN: pa.array(results, type=pa.string())})
