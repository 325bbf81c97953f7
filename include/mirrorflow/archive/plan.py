"""An archive run's plan: from S3 progress and the source's offsets, each partition's range for this run.

Per archived cluster the driver (the Spark job's main process, or any Python
process for tests) does:

1. read the cluster's progress object from S3 (:mod:`.progress`);
2. list the selected topics' partitions and their earliest and last stable
   offsets (one request each); every partition continues at its progress'
   ``next``, a new one at the source's earliest offset. If retention deleted
   records the archive had not read yet (``next < earliest``) the gap is
   recorded as ``lost`` in the manifest and logged as an error, and the
   partition's coverage restarts at the earliest offset;
3. cap each range by ``max_records_per_run`` (:mod:`mirrorflow.archive.job`
   packs the ranges into Spark tasks, :func:`mirrorflow.work.pack`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TopicPartition

from mirrorflow.archive import layout
from mirrorflow.archive.progress import Progress, read_progress
from mirrorflow.archive.spec import ArchiveSpec
from mirrorflow.kafka import logical_earliest_and_stable, mirrored_topics
from mirrorflow.topology.model import TopicSelector

log = logging.getLogger(__name__)


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
    topics = {t: n for t, n in mirrored_topics(source, timeout).items() if selector.selects(t)}  # logical names
    tps = [TopicPartition(t, p) for t, n in sorted(topics.items()) for p in range(n)]
    if not tps:
        return plan
    lows, ends = logical_earliest_and_stable(source, tps, timeout)
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
