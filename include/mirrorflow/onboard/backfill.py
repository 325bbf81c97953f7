"""The onboarding backfill: a Spark job that copies the sibling's history to the new cluster, exactly once.

It is the copy engine with three differences, all in the per-partition task
(:class:`~mirrorflow.copy.PartitionTask`):

- every message is copied whatever its flags, with the bits of every level the
  new cluster distributes at added (``backfill_flags``), so the new cluster's
  distributors never send backfilled messages on;
- where the link has no checkpoint yet the copy starts where the mode says
  (``retained``: the sibling's first offset; ``since``: the first offset at or
  after a timestamp; ``none``: the sibling's end; ``archive``: the first
  archived offset) and commits that start even when nothing is copied;
- with ``archive`` the partition's archived range is restored from S3 first,
  through the same transactions, then Kafka continues at the next offset.

Fencing and checkpoints are the new link's own (``transactional.id`` and
checkpoint group of ``<sibling>.L<level>``), so a killed backfill re-runs from
where it committed, and the regular level run takes over at the same offset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirrorflow.copy import PartitionTask, txn_unit
from mirrorflow.copy.engine import attempt_checkpoints, execute, passed
from mirrorflow.copy.state import EARLIEST
from mirrorflow.defaults import DEFAULT_COPY_THREADS, DEFAULT_TXN_RECORDS
from mirrorflow.errors import KafkaOperationError
from mirrorflow.internal_names import BACKFILL_SINCE_GROUP
from mirrorflow.journal import journal_entry
from mirrorflow.kafka import ClusterClient, logical_earliest_and_stable
from mirrorflow.progress import Progress
from mirrorflow.spark import SparkJobResult, SparkJobSpec, parallelism
from mirrorflow.work import PartitionWork, pack

log = logging.getLogger(__name__)

#: Environment variable that carries the backfill spec into ``spark-submit``.
BACKFILL_ENV = "MIRRORFLOW_BACKFILL"


@dataclass(frozen=True)
class BackfillSpec(SparkJobSpec, env=BACKFILL_ENV, kind="backfill spec", passed_by="mirror_onboard_cluster"):
    run_id: str
    link_id: str
    level: int
    source: str
    target: str
    mode: str
    bits: int
    #: Topic -> partitions.
    topics: Mapping[str, int]
    clusters: Mapping[str, Mapping[str, Any]] = field(repr=False)
    since_ms: int | None = None
    #: topic -> {partition: [first, end]} restored from the archive before Kafka.
    restore: Mapping[str, Mapping[str, list[int]]] = field(default_factory=dict)
    #: The archive location (``ArchiveLocation.to_dict()``), credentials included: hidden.
    location: Mapping[str, Any] | None = field(default=None, repr=False)
    slots: int | None = None
    txn_records: int = DEFAULT_TXN_RECORDS
    #: Stop each partition after this many records (tests; a paced backfill).
    max_records: int | None = None
    #: Partitions each Spark task copies at the same time (``replication.copy_threads``).
    copy_threads: int = DEFAULT_COPY_THREADS
    #: Cluster -> its topic format (``NameFormat.to_dict()``), for the clusters that rename (``topics`` are
    #: logical names).
    names: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: The namespace of the tree whose own names the copies use on shared clusters (:meth:`ClusterClient.own`);
    #: ``""``: the only tree.
    namespace: str = ""

    @classmethod
    def from_dict(cls, data: Any) -> BackfillSpec:
        try:
            return cls(**data)
        except (TypeError, ValueError) as exc:
            raise cls.invalid(str(exc)) from None


@dataclass
class BackfillResult(SparkJobResult):
    run_id: str
    link_id: str
    source: str
    target: str
    mode: str
    partitions: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    plan_s: float = 0.0
    copy_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "link": self.link_id, "source": self.source, "target": self.target,
            "mode": self.mode, "ok": self.ok, "partitions": len(self.partitions),
            "copied": sum(p["copied"] for p in self.partitions),
            "restored": sum(p.get("restored", 0) for p in self.partitions),
            "lost_to_retention": sum(p["lost_to_retention"] for p in self.partitions),
            "plan_s": round(self.plan_s, 3), "copy_s": round(self.copy_s, 3), "errors": list(self.errors),
        }

    def details(self) -> dict[str, Any]:
        return {"partition_results": self.partitions}


def _since_offsets(client: ClusterClient, tps: list[TopicPartition], since_ms: int, timeout: float
                   ) -> dict[tuple[str, int], int]:
    """First offset at or after ``since_ms`` per partition (the end when there is none)."""
    consumer = Consumer(client.consumer(BACKFILL_SINCE_GROUP))
    try:
        answer = consumer.offsets_for_times([TopicPartition(tp.topic, tp.partition, since_ms)
                                             for tp in client.on_cluster(tps)], timeout=timeout)
    except KafkaException as exc:
        raise KafkaOperationError(client.name, "offsets for times", exc.args[0]) from exc
    finally:
        consumer.close()
    return {(client.logical(tp.topic) or tp.topic, tp.partition): tp.offset for tp in answer}


def plan_tasks(spec: BackfillSpec, timeout: float = 30.0) -> list[PartitionTask]:
    """One task per partition: its start rule, its restore range, and the sibling's end now (the cut)."""
    source, target = spec.client(spec.source), spec.client(spec.target)
    tps = [TopicPartition(t, p) for t, n in sorted(spec.topics.items()) for p in range(n)]
    if not tps:
        return []
    checkpoints = attempt_checkpoints(target, spec.link_id, tps, timeout)
    lows, ends = logical_earliest_and_stable(source, tps, timeout)
    since: dict[tuple[str, int], int] = {}
    if spec.mode == "since":
        assert spec.since_ms is not None  # the onboarding form requires a timestamp for backfill 'since'
        since = _since_offsets(source, tps, spec.since_ms, timeout)
    tasks = []
    for tp in tps:
        key = (tp.topic, tp.partition)
        restore = (spec.restore.get(tp.topic) or {}).get(str(tp.partition))
        if spec.mode == "none":
            start = ends[key]
        elif spec.mode == "since":
            start = since[key] if since.get(key, -1) >= 0 else ends[key]
        elif restore:
            start = restore[0]
        else:
            start = EARLIEST
        done, _ = checkpoints.get(key, (None, ""))
        if done is not None and done >= ends[key]:
            continue  # this partition's backfill is complete (a re-run)
        first = lows[key] if start == EARLIEST else start
        tasks.append(PartitionTask(
            link_id=spec.link_id, level=spec.level, source=spec.source, target=spec.target, topic=tp.topic,
            partition=tp.partition, end_offset=ends[key], txn_records=spec.txn_records, start_offset=start,
            planned_records=max(0, ends[key] - max(first, done or 0)),
            backfill_flags=spec.bits, max_records=spec.max_records,
            restore={"location": dict(spec.location or {}), "end": restore[1]} if restore else None,
            require_contiguous=spec.mode == "archive",
            source_name=source.renamed(tp.topic),
            target_name=target.renamed(tp.topic),
        ))
        log.info("backfill %s %s[%d]: %s, source %d..%d%s", spec.link_id, tp.topic, tp.partition,
                 f"continuing from checkpoint {done}" if done is not None else f"starting at {start}"
                 if start != EARLIEST else "starting at the sibling's first offset", lows[key], ends[key],
                 f", archive {restore[0]}..{restore[1]}" if restore else "")
    return tasks



def run_backfill(spec: BackfillSpec, spark: Any = None) -> BackfillResult:
    """Plan, copy on Spark (or in this process when ``spark`` is ``None``), audit each partition."""
    result = BackfillResult(spec.run_id, spec.link_id, spec.source, spec.target, spec.mode)
    started = time.monotonic()
    tasks = plan_tasks(spec)
    slots = spec.slots or parallelism(spark)
    works = [PartitionWork(t.link_id, t.topic, t.partition, 0, max(1, t.end_offset - max(t.start_offset or 0, 0)))
             for t in tasks]
    by_key = {(t.link_id, t.topic, t.partition): t for t in tasks}
    bins = [[by_key[(w.link_id, w.topic, w.partition)] for w in b] for b in pack(works, slots, unit=txn_unit)]
    result.plan_s = time.monotonic() - started
    log.info("backfill %s: %s -> %s (%s), %d partitions in %d Spark tasks", spec.link_id, spec.source,
             spec.target, spec.mode, len(tasks), len(bins))
    started = time.monotonic()
    planned = sum(t.planned_records if spec.max_records is None else min(t.planned_records, spec.max_records)
                  for t in tasks)
    progress = Progress(f"backfill {spec.link_id} run {spec.run_id}", planned,
                        fields={"job": "backfill", "run_id": spec.run_id, "link": spec.link_id})
    results = execute(spark, spec, bins, progress)
    progress.finish(passed(results), sum(r["bytes"] for r in results))
    for r in sorted(results, key=lambda r: (r["topic"], r["partition"])):
        result.partitions.append(r)
        journal_entry("backfill", run_id=spec.run_id, link=spec.link_id, source=spec.source, target=spec.target,
                      mode=spec.mode, topic=r["topic"], partition=r["partition"],
                      source_offsets=[r["start_offset"], r["next_offset"]], copied=r["copied"], restored=r["restored"],
                      checksum=f"crc32:{r['checksum']:08x}", lost_to_retention=r["lost_to_retention"], error=r["error"])
        if r["error"]:
            result.errors.append(f"{spec.link_id} ({spec.source} -> {spec.target}) {r['topic']}[{r['partition']}] "
                                 f"at source offset {r['error_offset']}: {r['error']}")
    result.copy_s = time.monotonic() - started
    journal_entry("backfill_run", **result.summary())
    return result
