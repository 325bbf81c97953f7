"""Switching a link's target to another leaf of the same sibling subtree, with no gap and no duplicate.

Why the old target's checkpoint is the exact cut: everything the link copied to
the old target before offset X (its checkpoint) is in the sibling subtree
already and reaches every leaf of it, the new target included, through the
lower levels. Everything from X on has not left the source for that subtree.
So the new target must start exactly at X, per partition, and the old target
must never take another copy from this link.

The switch, per link, when the old target answers:

1. shape the new target's topics like the source's (the checkpoint must be
   committed under topic-partitions that exist there);
2. fence (:mod:`mirrorflow.actions.cut`, shared with the renumbering's carry):
   ``init_transactions`` with the link's ``transactional.id`` of every
   partition on the old target; any copy still running there is aborted and
   can no longer commit;
3. read the old target's checkpoints (now stable) and commit them again with
   the metadata ``mirrorflow:switched-to=<new>``: a copier that still aims at
   the old target reads that mark after its own fencing and stops, so a stale
   run cannot move the cut;
4. fence and read again: if a copy slipped in between 2 and 3 the offsets
   differ, and the switch repeats from 2;
5. replace the link's checkpoints on the new target with the cut.

When the old target does not answer, its checkpoint cannot be read. With
``force`` the cut is taken from provenance instead: on the new target, the
highest origin offset of this source's messages per partition, plus one.
Messages the old target had received but not yet passed on within the subtree
are then copied again to the new target; if the old target comes back and
passes them on too, the new target holds them twice. The report says so.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from mirrorflow.actions.cut import CutUnstable, commit_checkpoints, cut
from mirrorflow.cluster_sync import sync_topic_shapes
from mirrorflow.copy.state import CopyScanner, ScanStalled, checkpoint_group, read_checkpoints, switch_mark
from mirrorflow.errors import ClusterUnreachable, MirrorflowError
from mirrorflow.journal import journal_entry
from mirrorflow.kafka import ClusterClient, Need, call_failed, mirrored_topics, probe
from mirrorflow.topology import Distributor
from mirrorflow.topology.model import TopicSelector

log = logging.getLogger(__name__)


class SwitchError(MirrorflowError):
    """A target switch was refused or could not complete; nothing was switched."""


@dataclass
class SwitchReport:
    link: str
    source: str
    old_target: str
    new_target: str
    mode: str  # "checkpoint", "provenance", "noop"
    dry_run: bool
    #: ``topic -> {partition: cut}``; ``None``: nothing copied yet, the new target starts at the beginning.
    cuts: dict[str, dict[int, int | None]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    attempts: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def switch_target(link: Distributor, new_target: str, clients: dict[str, ClusterClient], topics: list[str],
                  *, dry_run: bool = False, force: bool = False, timeout: float = 30.0,
                  max_attempts: int = 5) -> SwitchReport:
    """Move ``link`` (with its current target in ``link.default_target``) to ``new_target``.

    ``clients`` holds the source, old and new target; ``topics`` the topology's topic patterns.
    Raises :class:`SwitchError` naming the problem; nothing changes on any cluster then.
    """
    old_target = link.default_target
    if not link.accepts(new_target):
        raise SwitchError(f"{link.link_id}: {new_target!r} is not a leaf of the level-{link.level} sibling subtree "
                          f"of {link.source}; allowed targets: {', '.join(link.sibling_leaves)}")
    report = SwitchReport(link.link_id, link.source, old_target, new_target, "noop", dry_run)
    if new_target == old_target:
        report.warnings.append(f"{link.link_id} already copies to {new_target}: nothing to do")
        return report
    source, old, new = clients[link.source], clients[old_target], clients[new_target]
    selector = TopicSelector(topics)
    probe(source, timeout)
    probe(new, timeout)
    try:
        probe(old, min(timeout, 10.0))
        old_up = True
    except ClusterUnreachable as exc:
        old_up = False
        if not force:
            raise SwitchError(f"{link.link_id}: the current target {old_target} is unreachable ({exc.detail}), so "
                              f"its checkpoint cannot be read. Retry when it answers for an exact switch, or set "
                              f"force to take the cut from provenance on {new_target} (messages {old_target} had "
                              f"not yet passed on would be copied to {new_target} again, and duplicated there if "
                              f"{old_target} comes back)") from None

    partitions = {t: n for t, n in mirrored_topics(source, timeout).items() if selector.selects(t)}
    tps = [TopicPartition(t, p) for t, n in sorted(partitions.items()) for p in range(n)]
    if dry_run:
        if old_up:
            checkpoints = read_checkpoints(old, link.link_id, tps, timeout) if tps else {}
            report.mode = "checkpoint"
            report.cuts = _by_topic({k: v[0] for k, v in checkpoints.items()})
        else:
            report.mode = "provenance"
            report.cuts = _by_topic(_provenance_cuts(new, link.source, tps, timeout))
        return report

    shape = sync_topic_shapes(source, new, selector, timeout=timeout)
    if shape.blocked:
        raise SwitchError(f"{link.link_id}: {new_target} cannot take these topics: "
                          + "; ".join(f"{t}: {e}" for t, e in shape.blocked.items()))
    if old_up:
        report.mode = "checkpoint"
        cuts = _cut_old_target(link.link_id, old, new_target, tps, report, timeout, max_attempts)
    else:
        report.mode = "provenance"
        cuts = _provenance_cuts(new, link.source, tps, timeout)
        report.warnings.append(
            f"{old_target} was unreachable: the cut on {new_target} comes from provenance; messages {old_target} "
            f"had received from {link.source} but not passed on are copied to {new_target} again, and are "
            f"duplicated there if {old_target} comes back and passes them on")
    _write_cut(new, link.link_id, cuts, timeout)
    report.cuts = _by_topic(cuts)
    journal_entry("switch_target", link=link.link_id, source=link.source, level=link.level, old_target=old_target,
                  new_target=new_target, mode=report.mode, partitions=len(cuts), attempts=report.attempts,
                  cuts=report.cuts, warnings=report.warnings)
    return report


def _by_topic(cuts: dict[tuple[str, int], int | None]) -> dict[str, dict[int, int | None]]:
    out: dict[str, dict[int, int | None]] = {}
    for (topic, partition), offset in sorted(cuts.items()):
        out.setdefault(topic, {})[partition] = offset
    return out


def _cut_old_target(link_id: str, old: ClusterClient, new_target: str, tps: list[TopicPartition],
                    report: SwitchReport, timeout: float, max_attempts: int) -> dict[tuple[str, int], int | None]:
    existing = mirrored_topics(old, timeout)
    on_old = [tp for tp in tps if tp.partition < existing.get(tp.topic, 0)]
    try:
        cuts, report.attempts = cut(old, link_id, on_old, switch_mark(new_target), timeout, max_attempts)
    except CutUnstable:
        report.attempts = max_attempts
        raise SwitchError(f"{link_id}: copies to the old target kept committing during {max_attempts} attempts to "
                          "cut; pause the level DAG and retry") from None
    cuts.update({(tp.topic, tp.partition): None for tp in tps if tp.partition >= existing.get(tp.topic, 0)})
    return cuts


def _write_cut(new: ClusterClient, link_id: str, cuts: dict[tuple[str, int], int | None], timeout: float) -> None:
    """Make the link's checkpoints on the new target exactly ``cuts`` (none where the cut is ``None``)."""
    admin_client = AdminClient(new.admin())
    group = new.own(checkpoint_group(link_id))
    try:
        admin_client.delete_consumer_groups([group], request_timeout=timeout)[group].result(timeout=timeout + 5)
    except KafkaException as exc:
        if exc.args[0].code() not in (KafkaError.GROUP_ID_NOT_FOUND,):
            raise call_failed(new, f"clear old checkpoints of link {link_id}", exc.args[0],
                              Need("GROUP", group, "DELETE")) from exc
    commit_checkpoints(new, link_id, [TopicPartition(t, p, off) for (t, p), off in cuts.items() if off is not None],
                       timeout)


def _provenance_cuts(new: ClusterClient, source: str, tps: list[TopicPartition], timeout: float
                     ) -> dict[tuple[str, int], int | None]:
    """Per source partition: one past the highest origin offset from ``source`` found on ``new``."""
    cuts: dict[tuple[str, int], int | None] = {(tp.topic, tp.partition): None for tp in tps}
    existing = mirrored_topics(new, timeout)
    with CopyScanner(new) as scanner:
        for topic in sorted({tp.topic for tp in tps if tp.topic in existing}):
            for p in range(existing[topic]):
                try:
                    for origin in scanner.origins(topic, p, timeout):
                        if origin and origin.cluster == source and origin.topic == topic:
                            key = (topic, origin.partition)
                            if key in cuts:
                                cut = cuts[key]
                                if cut is None or origin.offset + 1 > cut:
                                    cuts[key] = origin.offset + 1
                except ScanStalled as exc:
                    raise SwitchError(str(exc)) from None
    return cuts
