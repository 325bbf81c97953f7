"""A link without a checkpoint whose target already holds copies of its source's partition.

Kafka deletes a group's committed offsets some time after their last commit
(``offsets.retention.minutes``), and a link whose id changed starts without one:
copying from the source's first offset would copy again everything the target
holds. The provenance of the target's copies says whether that is so, and often
where the link stopped (:mod:`mirrorflow.copy.state.recovery`); where it cannot be
proven, nothing is copied and the refusal says how to go on.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException, TopicPartition

from mirrorflow.copy.spec import JobSpec, LinkJob, PartitionError, link_fields
from mirrorflow.copy.state.checkpoints import checkpoint_group, read_checkpoints
from mirrorflow.copy.state.copies import Copies, copies_in_partitions, find_copies
from mirrorflow.copy.state.recovery import recover_position
from mirrorflow.errors import KafkaOperationError
from mirrorflow.journal import journal_warning
from mirrorflow.kafka import ClusterClient, group_ids

log = logging.getLogger(__name__)


def lost_checkpoint(spec: JobSpec, link: LinkJob, source: ClusterClient, target: ClusterClient,
                    tp: TopicPartition, end: int, timeout: float, found: Copies | None = None
                    ) -> PartitionError | int | None:
    """Where a link without a checkpoint resumes: ``None`` (no copies: a new link), the proven resume point,
    or the refusal. ``found``: the partition's copies on the target if already read (:func:`prescan`)."""
    if found is None:
        found = find_copies(target, link.source, tp.topic, tp.partition, timeout)
    if found.highest is None:
        return None
    committed, _ = read_checkpoints(target, link.link_id, [tp], timeout).get((tp.topic, tp.partition), (None, ""))
    if committed is not None:  # another attempt of the link committed meanwhile: its copy starts from there
        return None
    renamed = _former_links(link, target, tp, timeout)
    recovery = None
    if not renamed and not link.switched:
        recovery = recover_position(source, target, link.level, tp.topic, tp.partition, found.highest, end, timeout)
        if recovery.position is not None:
            journal_warning("checkpoint_recovered", run_id=spec.run_id, link=link_fields(link), topic=tp.topic,
                            partition=tp.partition, position=recovery.position, how=recovery.why)
            log.warning("%s %s[%d]: the checkpoint on %s was lost; resuming at %d, proven from provenance: %s",
                        link.link_id, tp.topic, tp.partition, link.target, recovery.position, recovery.why)
            return recovery.position
    if renamed:
        cause = (f"{link.target} holds checkpoints of {', '.join(renamed)} for it: the levels were renumbered. "
                 f"Carry the checkpoints over with mirror_carry_checkpoints (level_map old:new, dry run first; "
                 f"docs/levels.md, \"Renumbering levels\")")
    else:
        unproven = recovery.why if recovery is not None else (
            f"the link's target is not its default one ({link.target}), so it may hold this source's messages "
            f"through other links too")
        cause = (f"the checkpoint was lost (committed offsets expired, or the link's id changed), and where the "
                 f"link stopped is not proven: {unproven}. Resume with "
                 f"mirror_resolve_gap (action resume_from, offset {found.highest + 1}) once the target is known to "
                 f"hold everything before it")
    error = (f"the link has no checkpoint on {link.target}, but {link.target} already holds {found.count} copies of "
             f"{link.source}'s messages of this partition (up to source offset {found.highest}); nothing copied, so "
             f"that nothing is copied twice: {cause}")
    journal_warning("checkpoint_missing", run_id=spec.run_id, link=link_fields(link), topic=tp.topic,
                    partition=tp.partition, copies_on_target=found.count, highest_origin_offset=found.highest,
                    former_links=renamed, unproven=None if renamed else (recovery.why if recovery else "switched"))
    return PartitionError(link.link_id, link.source, link.target, tp.topic, tp.partition, None, error)


def prescan(link: LinkJob, target: ClusterClient, tps: list[TopicPartition], timeout: float
            ) -> dict[tuple[str, int], Copies]:
    """The copies on the target of each of ``tps`` (partitions without a checkpoint), a topic's partitions read
    together; a topic or partition whose read failed is left out, and :func:`lost_checkpoint` reads it alone."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out: dict[tuple[str, int], Copies] = {}
    for topic, partitions in sorted(by_topic.items()):
        try:
            found = copies_in_partitions(target, link.source, topic, partitions, timeout)
        except (KafkaException, KafkaOperationError) as exc:
            log.info("%s %s: the partitions without a checkpoint are scanned one by one (%s)", link.link_id, topic,
                     exc)
            continue
        out.update(((topic, p), copies) for p, copies in found.items())
    return out


def _former_links(link: LinkJob, target: ClusterClient, tp: TopicPartition, timeout: float) -> list[str]:
    """Other link ids of the same source with a checkpoint for ``tp`` on this target: the levels were renumbered."""
    prefix = target.own(checkpoint_group(f"{link.source}.L"))
    out = []
    for group in group_ids(target, prefix, timeout):
        other = group[len(target.own(checkpoint_group(""))):]
        if other == link.link_id or not other[len(link.source) + 2:].isdigit():
            continue
        committed, _ = read_checkpoints(target, other, [tp], timeout).get((tp.topic, tp.partition), (None, ""))
        if committed is not None:
            out.append(other)
    return out
