"""What a Spark executor runs: the partition ranges of one task, copied on a few threads.

Kept apart from :mod:`mirrorflow.copy.job` (the driver: planning, results,
audit) because Spark ships the task's function by reference, so a Python worker
imports this module's dependencies and nothing else. The driver's modules pull
in the topology's validated models and with them pydantic; on an executor that
was about 0.4 s of every worker's start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mirrorflow.copy.clients import CopyClients
from mirrorflow.copy.partition import UNREACHABLE_CODES, PartitionResult, PartitionTask, copy_partition
from mirrorflow.errors import ClusterUnreachable
from mirrorflow.kafka.admin import probe
from mirrorflow.kafka.config import ClusterClient

log = logging.getLogger(__name__)


def copy_tasks(clusters: Mapping[str, Mapping[str, Any]], tasks: Iterable[PartitionTask],
               threads: int = 1) -> Iterator[dict[str, Any]]:
    """Executor side: copy each task's partition; one result dict per task, errors included.

    Up to ``threads`` partitions are copied at the same time, each on its own
    thread with its own producer and consumers; a thread keeps its consumers (and,
    at least once, its producer) for its next partition (:mod:`mirrorflow.copy.clients`).
    A copier spends much of its time waiting on the brokers (acknowledgements before each commit, the commit
    itself, fencing, the first fetch); one partition at a time left the core
    idle during those waits, and the profile showed them as the largest cost.

    When a partition fails because a cluster stopped answering (each such failure
    costs the client's timeouts, about a minute), the cluster is probed once; if it
    is down, this task's partitions on it that have not started yet are reported
    failed at their checkpoint straight away instead of waiting out the same
    timeouts one by one.
    """
    clients = {name: ClusterClient(name, dict(settings)) for name, settings in clusters.items()}
    down: dict[str, str] = {}
    kept = threading.local()  # each copy thread's clients, kept from one range to its next
    pools: list[CopyClients] = []

    def thread_clients() -> CopyClients:
        pool = getattr(kept, "pool", None)
        if pool is None:
            pool = kept.pool = CopyClients()
            pools.append(pool)
        return pool

    def one(task: PartitionTask) -> dict[str, Any]:
        dead = next((c for c in (task.source, task.target) if c in down), None)
        if dead is not None:
            return PartitionResult(task.link_id, task.source, task.target, task.topic, task.partition,
                                   end_offset=task.end_offset,
                                   error=f"not attempted: cluster {dead} is unreachable ({down[dead]})").to_dict()
        try:
            result = copy_partition(task, clients[task.source], clients[task.target], clients=thread_clients())
        except Exception as exc:  # never let one partition end the Spark task of the others
            log.exception("%s %s[%d]: copier failed", task.link_id, task.topic, task.partition)
            result = PartitionResult(task.link_id, task.source, task.target, task.topic, task.partition,
                                     end_offset=task.end_offset, error=f"{type(exc).__name__}: {exc}")
        if result.error_code in UNREACHABLE_CODES:
            for name in (task.target, task.source):
                if name in down:
                    continue
                try:
                    probe(clients[name], timeout=5.0)
                except ClusterUnreachable as exc:
                    down[name] = exc.detail
                    log.error("cluster %s is unreachable; the remaining partitions of this task that use it are "
                              "left at their checkpoints", name)
        return result.to_dict()

    try:
        if threads <= 1:
            yield from map(one, tasks)
            return
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mirrorflow-copy") as executor:
            yield from executor.map(one, tasks)
    finally:
        for pool in pools:
            pool.close()


def copy_bins(clusters: Mapping[str, Mapping[str, Any]], threads: int,
              bins: Iterator[list[PartitionTask]]) -> Iterator[dict]:
    """One Spark task: its bins of partition ranges, copied by :func:`copy_tasks`."""
    for tasks in bins:
        yield from copy_tasks(clusters, tasks, threads)
