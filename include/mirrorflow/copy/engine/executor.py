"""What a Spark executor runs: the partition ranges of one task, copied on a few threads.

Kept apart from the driver (:mod:`mirrorflow.copy.job`, :mod:`~mirrorflow.copy.plan`: planning, results,
audit) because Spark ships the task's function by reference, so a Python worker
imports this module's dependencies and nothing else. The driver's modules pull
in the topology's validated models and with them pydantic, which would add to
every Python worker's start (docs/benchmarks.md). :func:`execute` is the
driver's door to it: every copy that runs on Spark (a level run, a backfill)
hands its bins of tasks here.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from mirrorflow.copy.engine.clients import CopyClients
from mirrorflow.copy.engine.group import copy_group, groupable
from mirrorflow.copy.engine.partition import copy_partition
from mirrorflow.copy.task import PartitionResult, PartitionTask
from mirrorflow.copy.txn_groups import txn_group
from mirrorflow.defaults import LARGE_GROUP_RECORDS
from mirrorflow.errors import ClusterUnreachable
from mirrorflow.kafka import UNREACHABLE_CODES, ClusterClient, probe
from mirrorflow.progress import Progress, in_context, tracking
from mirrorflow.spark import run_bins

log = logging.getLogger(__name__)


def copy_tasks(clusters: Mapping[str, Mapping[str, Any]], tasks: Iterable[PartitionTask],
               threads: int = 1, namespace: str = "") -> Iterator[dict[str, Any]]:
    """Executor side: copy each task's partition; one result dict per task, errors included.

    Tasks are copied by transaction group (:func:`by_txn_group`): a group's partitions
    together, in shared transactions (:mod:`mirrorflow.copy.engine.group`), or one after the
    other when they need the per-partition path. Up to ``threads`` groups are copied at
    the same time, but at most one :func:`large` group: each on its own thread with its
    own producer and consumers; a thread keeps its consumers (and, at least once, its
    producer) for its next group (:mod:`mirrorflow.copy.engine.clients`).
    A small copy spends most of its time waiting on the brokers (acknowledgements before
    each commit, the commit itself, fencing, the first fetch); one at a time left the
    core idle during those waits. A large copy keeps the core busy by itself.

    When a partition fails because a cluster stopped answering (each such failure
    costs the client's timeouts, about a minute), the cluster is probed once; if it
    is down, this task's partitions on it that have not started yet are reported
    failed at their checkpoint straight away instead of waiting out the same
    timeouts one by one.
    """
    clients = {name: ClusterClient(name, dict(settings), namespace=namespace) for name, settings in clusters.items()}
    down: dict[str, str] = {}
    kept = threading.local()  # each copy thread's clients, kept from one range to its next
    pools: list[CopyClients] = []

    def thread_clients() -> CopyClients:
        pool = getattr(kept, "pool", None)
        if pool is None:
            pool = kept.pool = CopyClients()
            pools.append(pool)
        return pool

    def unreached(task: PartitionTask) -> PartitionResult | None:
        dead = next((c for c in (task.source, task.target) if c in down), None)
        if dead is None:
            return None
        return PartitionResult(task.link_id, task.source, task.target, task.topic, task.partition,
                               end_offset=task.end_offset,
                               error=f"not attempted: cluster {dead} is unreachable ({down[dead]})")

    def guarded(group: list[PartitionTask], copy) -> list[PartitionResult]:
        """``copy()``'s results; an exception fails the group's partitions, a silent cluster is probed."""
        first = group[0]
        try:
            results = copy()
        except Exception as exc:  # never let one partition end the Spark task of the others
            log.exception("%s %s%s: copier failed", first.link_id, first.topic, [t.partition for t in group])
            results = [PartitionResult(t.link_id, t.source, t.target, t.topic, t.partition, end_offset=t.end_offset,
                                       error=f"{type(exc).__name__}: {exc}") for t in group]
        if any(r.error_code in UNREACHABLE_CODES for r in results):
            for name in (first.target, first.source):
                if name in down:
                    continue
                try:
                    probe(clients[name], timeout=5.0)
                except ClusterUnreachable as exc:
                    down[name] = exc.detail
                    log.error("cluster %s is unreachable; the remaining partitions of this task that use it are "
                              "left at their checkpoints", name)
        return results

    def one(group: list[PartitionTask]) -> list[dict[str, Any]]:
        source, target = clients[group[0].source], clients[group[0].target]
        if len(group) > 1 and all(map(groupable, group)):
            if unreached(group[0]) is not None:  # one source, one target: all of the group or none
                not_attempted = []
                for t in group:
                    skipped = unreached(t)
                    assert skipped is not None  # the clusters of group[0], and ``down`` only grows
                    not_attempted.append(skipped.to_dict())
                return not_attempted
            return [r.to_dict() for r in guarded(group, lambda: copy_group(group, source, target,
                                                                           clients=thread_clients()))]
        out = []
        for task in group:  # one after the other: the group's partitions share a transactional.id
            result = unreached(task) or guarded([task], lambda: [copy_partition(task, source, target,
                                                                                clients=thread_clients())])[0]
            out.append(result.to_dict())
        return out

    groups = by_txn_group(tasks)
    try:
        if threads <= 1 or len(groups) <= 1:
            for group in groups:
                yield from one(group)
            return
        for results in in_lanes(groups, one, threads):
            yield from results
    finally:
        for pool in pools:
            pool.close()


def large(group: list[PartitionTask]) -> bool:
    """Whether ``group`` is copied alone (see :data:`~mirrorflow.defaults.LARGE_GROUP_RECORDS`).

    A group under a byte-rate cap never is: it waits on its cap, not on a core, and its
    share of the cap assumes it runs beside the others (mirrorflow.copy.plan).
    """
    return (sum(t.planned_records for t in group) >= LARGE_GROUP_RECORDS
            and not any(t.max_bytes_per_second for t in group))


def in_lanes(groups: list[list[PartitionTask]], copy: Callable[[list[PartitionTask]], list],
              threads: int) -> list[list]:
    """``copy(group)`` of every group on ``threads`` threads, at most one :func:`large` group at a time.

    The Spark task holds one core. Large groups are bound by it: two side by side in one
    Python worker took longer together than one after the other (docs/benchmarks.md).
    Small groups are bound by the brokers' round trips and fill the other threads. A
    thread that finds only large groups left while one is being copied ends; the thread
    copying it takes the next. Results come back in the order of ``groups``.
    """
    lock = threading.Lock()
    is_large = [large(g) for g in groups]
    todo_large = deque(i for i, big in enumerate(is_large) if big)
    todo_small = deque(i for i, big in enumerate(is_large) if not big)
    busy = [False]  # a large group is being copied
    out: list[list | None] = [None] * len(groups)
    failure: list[BaseException] = []

    def lane() -> None:
        while not failure:
            with lock:
                if todo_large and not busy[0]:
                    i = todo_large.popleft()
                    busy[0] = True
                elif todo_small:
                    i = todo_small.popleft()
                else:
                    return
            try:
                out[i] = copy(groups[i])
            except BaseException as exc:  # copy() fails no group by itself; this is a bug: re-raised below
                failure.append(exc)
                return
            finally:
                if is_large[i]:
                    with lock:
                        busy[0] = False

    # each lane in a copy of the caller's context: copies count into the caller's progress (mirrorflow.progress)
    workers = [threading.Thread(target=in_context(lane), name=f"mirrorflow-copy-{n}", daemon=True)
               for n in range(min(threads, len(groups)))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failure:
        raise failure[0]
    return out  # type: ignore[return-value]


def by_txn_group(tasks: Iterable[PartitionTask]) -> list[list[PartitionTask]]:
    """``tasks`` gathered by transaction group (same link and target, see :mod:`mirrorflow.copy.txn_groups`), in order.

    A group's tasks run on one thread, one transaction stream: two threads copying
    partitions of one group would fence each other's producer.
    """
    groups: dict[tuple, list[PartitionTask]] = {}
    for task in tasks:
        groups.setdefault((task.link_id, task.source, task.target, *txn_group(task.topic, task.partition)),
                          []).append(task)
    return list(groups.values())


def copy_bins(clusters: Mapping[str, Mapping[str, Any]], threads: int, namespace: str,
              bins: Iterator[list[PartitionTask]]) -> Iterator[dict]:
    """One Spark task: its bins of partition ranges, copied by :func:`copy_tasks`."""
    for tasks in bins:
        yield from copy_tasks(clusters, tasks, threads, namespace)


class CopySpec(Protocol):
    """What :func:`execute` reads of a copying job's spec (the level job's and the backfill's)."""

    @property
    def clusters(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def copy_threads(self) -> int: ...
    @property
    def level(self) -> int: ...
    @property
    def run_id(self) -> str: ...
    @property
    def namespace(self) -> str: ...


def execute(spark: Any, spec: CopySpec, bins: list[list[PartitionTask]], progress: Progress | None = None
            ) -> list[dict[str, Any]]:
    """Run the bins as Spark tasks (one bin, one task), or in this process when ``spark`` is ``None``.

    ``spec`` is the job's spec (:class:`CopySpec`: ``clusters``, ``level``, ``run_id``, ``copy_threads``,
    ``namespace``);
    ``spark`` a SparkContext or a Spark Connect session (:mod:`mirrorflow.spark.run`).
    ``progress``: in this process the copiers count every committed transaction into it
    (:func:`mirrorflow.progress.note`); on Spark it follows the finished Spark tasks.
    """
    if not bins:
        return []
    clusters = {name: dict(settings) for name, settings in spec.clusters.items()}
    threads, namespace = spec.copy_threads, spec.namespace
    if spark is None:
        if progress is None:
            return [r for tasks in bins for r in copy_tasks(clusters, tasks, threads, namespace)]
        with tracking(progress), progress.running():
            return [r for tasks in bins for r in copy_tasks(clusters, tasks, threads, namespace)]
    return run_bins(spark, functools.partial(copy_bins, clusters, threads, namespace), bins,
                    f"mirrorflow level {spec.level} run {spec.run_id}: {sum(map(len, bins))} partitions", progress)


def passed(results: list[dict[str, Any]]) -> int:
    """Source offsets the copies passed (what a progress plan counts): from each start to where it committed."""
    return sum(max(0, r["next_offset"] - r["start_offset"]) for r in results if r["start_offset"] >= 0)
