"""A link's planned ranges as the copier's tasks, each carrying what the copier must know of its partition.

The link's byte rate cap is shared by what copies at once: transaction groups, each
copied by one thread (:mod:`mirrorflow.copy.engine.group`), so every task of a group
carries the group's share. A task also carries its window's end
(:mod:`~mirrorflow.copy.plan.windows`), both sides' ``max.message.bytes`` and topic
ids, and what the plan decided of its start (:mod:`~mirrorflow.copy.plan.starts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mirrorflow.copy.plan.shapes import Shaped
from mirrorflow.copy.plan.starts import Starts
from mirrorflow.copy.plan.windows import window_end
from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow.copy.task import PartitionTask
from mirrorflow.copy.txn_groups import txn_unit
from mirrorflow.defaults import DEFAULT_TXN_RECORDS


def link_tasks(spec: JobSpec, link: LinkJob, starts: Starts, ids: Mapping[str, Mapping[str, str]],
               shaped: Shaped, slots: int | Callable[[], int]) -> list[PartitionTask]:
    """One task per planned range. ``slots`` is asked only here, at the end: the Spark session may still be
    opening (mirrorflow.copy.job)."""
    if callable(slots):
        slots = slots()
    concurrent = max(1, min(slots * spec.copy_threads, len({txn_unit(w) for w in starts.works})))
    stop_at = window_end(link)
    rate_share = link.max_bytes_per_second / concurrent if link.max_bytes_per_second else None
    limits = shaped.limits
    source, target = spec.client(link.source), spec.client(link.target)
    return [PartitionTask(
        link_id=link.link_id, level=link.level, source=link.source, target=link.target,
        topic=work.topic, partition=work.partition, end_offset=work.end, planned_records=work.records,
        source_name=source.renamed(work.topic),
        target_name=target.renamed(work.topic),
        max_records=link.max_records_per_run,
        txn_records=link.txn_records or DEFAULT_TXN_RECORDS,
        max_bytes=link.max_bytes_per_run,
        stop_at=stop_at,
        max_bytes_per_second=rate_share,
        exactly_once=link.exactly_once,
        on_gap=link.on_gap,
        on_malformed=spec.on_malformed,
        max_message_bytes=limits.get(work.topic, (None, None))[0],
        source_max_message_bytes=limits.get(work.topic, (None, None))[1],
        source_topic_id=ids["source"].get(work.topic),
        target_topic_id=ids["target"].get(work.topic),
        keep_alive=(work.topic, work.partition) in starts.keep_alive,
        start_offset=starts.starts.get((work.topic, work.partition)),
        held=starts.held.get((work.topic, work.partition)),
        restore=starts.restores.get((work.topic, work.partition)),
    ) for work in starts.works]
