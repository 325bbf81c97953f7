"""Carry ``_mirrorflow.offsets`` along the distribution tree, exactly like data.

The same copier as the level jobs (fenced transactional copy, checkpoint in the
same transaction, copy flags and provenance), run in-process because the topic
is small. Levels run from the top down: a record copied across the top level
is then spread inside the receiving subtree by the lower levels of the same
pass, so one pass reaches every cluster (bottom-up would need several).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from mirrorflow.copy import PartitionTask
from mirrorflow.copy.engine import copy_partition
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import ClusterClient, earliest_and_stable
from mirrorflow.offsets.position import OFFSETS_TOPIC
from mirrorflow.topology.tree import Distributor

log = logging.getLogger(__name__)


@dataclass
class DistributionReport:
    copied: int = 0
    skipped: int = 0
    #: link id -> error, for links that could not run (their records follow on the next pass).
    errors: dict[str, str] = field(default_factory=dict)


def distribute(links_by_level: Mapping[int, Iterable[Distributor]], clients: Mapping[str, ClusterClient],
               *, skip: Iterable[str] = ()) -> DistributionReport:
    """One pass over every link, highest level first. Clusters in ``skip`` (unreachable) are left out."""
    report = DistributionReport()
    down = set(skip)
    for level in sorted(links_by_level, reverse=True):
        for link in links_by_level[level]:
            if link.source in down or link.default_target in down:
                unreachable = link.source if link.source in down else link.default_target
                report.errors[link.link_id] = f"cluster {unreachable} is unreachable"
                continue
            source, target = clients[link.source], clients[link.default_target]
            topic = source.own(OFFSETS_TOPIC)
            try:
                _, ends = earliest_and_stable(source, [TopicPartition(topic, 0)])
            except MirrorflowError as exc:
                report.errors[link.link_id] = str(exc)
                continue
            task = PartitionTask(link_id=link.link_id, level=link.level, source=link.source,
                                 target=link.default_target, topic=topic, partition=0,
                                 end_offset=ends[(topic, 0)], txn_records=5000)
            result = copy_partition(task, source, target)
            report.copied += result.copied
            report.skipped += result.skipped
            if result.error:
                report.errors[link.link_id] = result.error
                log.error("%s: distributing %s stopped at offset %s: %s", link.link_id, topic,
                          result.error_offset, result.error)
            elif result.copied:
                log.info("%s: %d position records copied to %s", link.link_id, result.copied, link.default_target)
    return report
