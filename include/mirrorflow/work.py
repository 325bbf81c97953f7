"""Partition work, and its packing into Spark tasks balanced by size.

Every job (level copy, backfill, archive) knows, for every selected partition,
where it starts and where the source ends. It caps each range by the per-run
limits and packs the ranges into at most ``slots`` tasks so that no executor
carries much more than the others (uReplicator's controller role, without a
consumer group rebalancing anything).

Packing is free to change from run to run: a copy is fenced per transaction
group, never per Spark task (:mod:`mirrorflow.copy.txn_groups`, whose
``txn_unit`` keeps a group's partitions in one task).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class PartitionWork:
    link_id: str
    topic: str
    partition: int
    start: int
    end: int
    #: Average bytes per record on the source (estimate from recent data); 0 if unknown.
    avg_record_bytes: float = 0.0
    #: Run even with nothing to copy: the copy has a position to commit (a new topic incarnation).
    must_run: bool = False

    @property
    def records(self) -> int:
        return max(0, self.end - self.start)

    @property
    def weight(self) -> float:
        """Estimated bytes, or records when sizes are unknown: what balancing compares."""
        return self.records * self.avg_record_bytes if self.avg_record_bytes > 0 else float(self.records)


def cap(work: PartitionWork, max_records: int | None = None, max_bytes: int | None = None) -> PartitionWork:
    """``work`` with its end pulled in to the per-run record and byte limits (at least one record)."""
    end = work.end
    if max_records is not None:
        end = min(end, work.start + max_records)
    if max_bytes is not None and work.avg_record_bytes > 0:
        end = min(end, work.start + max(1, int(max_bytes // work.avg_record_bytes)))
    return work if end == work.end else replace(work, end=end)


def pack(works: list[PartitionWork], slots: int,
         unit: Callable[[PartitionWork], Hashable] | None = None) -> list[list[PartitionWork]]:
    """Longest-processing-time-first packing into at most ``slots`` non-empty tasks.

    ``unit``: works with the same key always share a task (and are placed together,
    with their weights summed); without it each work is its own unit.
    Empty ranges are dropped. The result is deterministic for the same input.
    Greedy LPT keeps the heaviest task within 4/3 of the best possible.
    """
    if slots < 1:
        raise ValueError(f"slots must be at least 1, got {slots}")
    units: dict[Hashable, list[PartitionWork]] = {}
    for i, work in enumerate(works):
        if work.records > 0 or work.must_run:
            units.setdefault(unit(work) if unit is not None else i, []).append(work)
    if not units:
        return []
    todo = sorted(units.values(), key=lambda ws: (-sum(w.weight for w in ws),
                                                  *min((w.link_id, w.topic, w.partition) for w in ws)))
    bins: list[list[PartitionWork]] = [[] for _ in range(min(slots, len(todo)))]
    heap = [(0.0, i) for i in range(len(bins))]
    for group in todo:
        load, i = heapq.heappop(heap)
        bins[i].extend(group)
        heapq.heappush(heap, (load + sum(w.weight for w in group), i))
    return bins
