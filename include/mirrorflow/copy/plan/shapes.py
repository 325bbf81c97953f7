"""Shaping targets: a link's target topics kept in its source's shape, and what that did, told on its report.

Shaping writes (creates missing topics, adds the partitions the source gained, aligns
the travelling configs with their owners: :mod:`~mirrorflow.copy.plan.configs`), so
the orchestrator shapes one link after another in the spec's order: a link's target
is another link's source, whose partitions that link reads. A topic whose shape
conflicts or fails is blocked alone: it is not copied in this run, the link's other
topics are.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from mirrorflow.cluster_sync import OwnerSide, ShapeResult, sync_topic_shapes
from mirrorflow.copy.spec import JobSpec, LinkJob, LinkReport, PartitionError, link_fields
from mirrorflow.copy.state.checkpoints import read_checkpoints
from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_warning
from mirrorflow.kafka import ClusterClient, list_topics
from mirrorflow.topology.model import TopicSelector

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shaped:
    """A link's target as shaping left it, and the seconds that took (with its ACL sync): the plan's first step."""

    result: ShapeResult
    seconds: float

    @property
    def blocked(self) -> dict[str, MirrorflowError]:
        """Topics not copied in this run: their shape conflicts, or could not be made."""
        return self.result.blocked

    @property
    def limits(self) -> dict[str, tuple[int | None, int | None]]:
        """Per topic: the target's and the source's ``max.message.bytes``."""
        return self.result.plan.limits


def shape_target(spec: JobSpec, link: LinkJob, selector: TopicSelector, owners: OwnerSide | None) -> ShapeResult:
    """Bring the link's target topics into its source's shape, their configs following ``owners``."""
    return sync_topic_shapes(spec.client(link.source), spec.client(link.target), selector,
                             align_configs=spec.align_configs, owners=owners)


def tell_shape(spec: JobSpec, link: LinkJob, shaped: Shaped, report: LinkReport, errors: list[PartitionError],
               timeout: float) -> None:
    """What shaping did, on the link's report; each blocked topic an error of its own."""
    shape = shaped.result
    report.created_topics = sorted(c.topic for c in shape.created)
    report.configs_aligned = {a.topic: sorted({*a.set, *a.delete}) for a in shape.aligned}
    report.config_problems = [*(str(e) for _, e in sorted(shape.align_failed.items())),
                              *(k.explain(v.topic, v.owner, v.target) for v in shape.plan.verdicts
                                for k in v.keys if k.action == "report")]
    report.declined += [d.to_dict() for d in shape.plan.declined]
    report.partitions_added = {a.topic: a.wanted for a in shape.partitions_added}
    report.deleted_on_source = sorted(shape.plan.deleted_on_source)
    if report.deleted_on_source:
        _deleted_on_source(spec, link, spec.client(link.target), report.deleted_on_source, timeout)
    for topic, error in shaped.blocked.items():
        errors.append(PartitionError(link.link_id, link.source, link.target, topic, None, None, str(error)))


def _deleted_on_source(spec: JobSpec, link: LinkJob, target: ClusterClient, topics: list[str],
                       timeout: float) -> None:
    """Say, per topic the source lost while the target keeps it, how far this link had copied it.

    What the source held past those positions when the topic was deleted is gone with
    it, and no reader can tell now whether there was any: the completeness audit,
    which counted the source's records as they came, names the ones never copied
    (docs/topics.md, "Deleted topics"). A topic the link never copied is only logged.
    """
    sizes = list_topics(target, timeout)
    tps = [TopicPartition(t, p) for t in topics for p in range(sizes.get(target.physical(t), 0))]
    checkpoints = read_checkpoints(target, link.link_id, tps, timeout) if tps else {}
    for topic in topics:
        copied = {p: off for (t, p), (off, _) in sorted(checkpoints.items()) if t == topic and off is not None}
        log.warning("%s: topic %s is gone from %s but still on %s; it is left there (delete it by hand if "
                    "that is wanted)", link.link_id, topic, link.source, link.target)
        if copied:
            journal_warning("topic_deleted_on_source", run_id=spec.run_id, link=link_fields(link), topic=topic,
                            copied_up_to=copied,
                            unknown="what the source held past these offsets when it deleted the topic")

