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
from mirrorflow.copy.group import copy_group, groupable
from mirrorflow.copy.partition import UNREACHABLE_CODES, PartitionResult, PartitionTask, copy_partition
from mirrorflow.copy.txn_group import txn_group
from mirrorflow.errors import ClusterUnreachable
from mirrorflow.kafka.admin import probe
from mirrorflow.kafka.config import ClusterClient

log = logging.getLogger(__name__)


def copy_tasks(clusters: Mapping[str, Mapping[str, Any]], tasks: Iterable[PartitionTask],
               threads: int = 1) -> Iterator[dict[str, Any]]:
    """Executor side: copy each task's partition; one result dict per task, errors included.

    Tasks are copied by transaction group (:func:`by_txn_group`): a group's partitions
    together, in shared transactions (:mod:`mirrorflow.copy.group`), or one after the
    other when they need the per-partition path. Up to ``threads`` groups are copied at
    the same time, each on its own thread with its own producer and consumers; a thread
    keeps its consumers (and, at least once, its producer) for its next group
    (:mod:`mirrorflow.copy.clients`).
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
                return [unreached(t).to_dict() for t in group]
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
        if threads <= 1:
            for group in groups:
                yield from one(group)
            return
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mirrorflow-copy") as executor:
            for results in executor.map(one, groups):
                yield from results
    finally:
        for pool in pools:
            pool.close()


def by_txn_group(tasks: Iterable[PartitionTask]) -> list[list[PartitionTask]]:
    """``tasks`` gathered by transaction group (same link and target, see :mod:`mirrorflow.copy.txn_group`), in order.

    A group's tasks run on one thread, one transaction stream: two threads copying
    partitions of one group would fence each other's producer.
    """
    groups: dict[tuple, list[PartitionTask]] = {}
    for task in tasks:
        groups.setdefault((task.link_id, task.source, task.target, *txn_group(task.topic, task.partition)),
                          []).append(task)
    return list(groups.values())


def copy_bins(clusters: Mapping[str, Mapping[str, Any]], threads: int,
              bins: Iterator[list[PartitionTask]]) -> Iterator[dict]:
    """One Spark task: its bins of partition ranges, copied by :func:`copy_tasks`."""
    for tasks in bins:
        yield from copy_tasks(clusters, tasks, threads)
