"""Carry links' checkpoints over when the levels of the tree are renumbered.

A link's id is ``<source>.L<level>``, and its checkpoint lives in a group named
after it (:func:`~mirrorflow.copy.state.checkpoints.checkpoint_group`). Renumbering the
levels (1 and 3 become 2 and 4, to make room for an onboarding) gives every link
a new id and so no checkpoint: the planner then refuses to copy (its target
already holds copies), naming the old link whose checkpoints it found.

Carrying is safe when the renumbering keeps the levels' order: a message's copy
flags say at which levels it was distributed, and the decision at a level asks
only "at this level or below?", which a monotone renumbering answers the same
way for every flag already written. So the map must be strictly increasing,
and a link keeps its source and target. The new link's checkpoints are
committed through its own ``transactional.id`` (fenced, like a copy), with the
old metadata (topic ids, last record read). The old link is cut first: its
copies are fenced and its checkpoints marked ``mirrorflow:carried-to=<new link>``,
so a run of the old topology, still running or started later, stops by name
instead of copying again what the new link copies; the old group stays as history.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import TopicPartition

from mirrorflow.actions.cut import CutUnstable, cut
from mirrorflow.copy import PartitionTask, txn_group
from mirrorflow.copy.engine import fenced_commit
from mirrorflow.copy.state import CheckpointMeta, Held, LastRead, carried_to, carry_mark, read_checkpoints
from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_warning
from mirrorflow.kafka import ClusterClient, mirrored_topics

log = logging.getLogger(__name__)


class CarryRefused(MirrorflowError):
    """The checkpoints cannot be carried over safely; nothing was changed."""


def parse_level_map(text: str) -> dict[int, int]:
    """``"1:2,3:4"`` -> ``{1: 2, 3: 4}``: old level -> new level, strictly increasing in both."""
    pairs: dict[int, int] = {}
    for item in (part.strip() for part in text.split(",") if part.strip()):
        old, sep, new = item.partition(":")
        if not sep or not old.strip().isdigit() or not new.strip().isdigit():
            raise CarryRefused(f"level_map: {item!r} is not <old level>:<new level> (example: 1:2,3:4)")
        if int(old) in pairs:
            raise CarryRefused(f"level_map: old level {old} is mapped twice")
        pairs[int(old)] = int(new)
    if not pairs:
        raise CarryRefused("level_map is empty (example: 1:2,3:4)")
    olds = sorted(pairs)
    news = [pairs[o] for o in olds]
    if any(b <= a for a, b in zip(news, news[1:], strict=False)):
        raise CarryRefused(f"level_map {text!r} does not keep the levels' order: copy flags already written would "
                           f"be read differently and messages copied twice or never")
    return pairs


@dataclass
class Carried:
    """What was (or would be) carried from one old link id to a new one."""

    old_link: str
    new_link: str
    source: str
    target: str
    partitions: int
    checkpoints: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def carry_checkpoints(old_link: str, new_link: str, new_level: int, source: ClusterClient, target: ClusterClient, *,
                      topics: list[str] | None = None, dry_run: bool = False, timeout: float = 30.0,
                      max_attempts: int = 5) -> Carried:
    """Commit ``old_link``'s checkpoints on ``target`` as ``new_link``'s, fenced; refused if the new link has any.

    The old link's checkpoints are cut first (fenced and marked, :mod:`mirrorflow.actions.cut`), so that
    no run of the old topology, running or still to start, copies past them.
    """
    names = topics if topics is not None else [t for t in mirrored_topics(source, timeout) if not t.startswith("_")]
    sizes = mirrored_topics(target, timeout)
    tps = [TopicPartition(t, p) for t in sorted(names) if t in sizes for p in range(sizes[t])]
    old = {k: v for k, v in read_checkpoints(target, old_link, tps, timeout).items() if v[0] is not None}
    if not old:
        raise CarryRefused(f"{target.name} holds no checkpoints of {old_link}: nothing to carry to {new_link}")
    present = {k: v[0] for k, v in read_checkpoints(target, new_link, tps, timeout).items() if v[0] is not None}
    if present:
        shown = ", ".join(f"{t}[{p}]={o}" for (t, p), o in sorted(present.items())[:5])
        raise CarryRefused(f"{new_link} already has checkpoints on {target.name} ({shown}): carrying {old_link}'s "
                           f"over them could copy messages twice or skip them; nothing changed")
    already = sorted({new for _, meta in old.values() if (new := carried_to(meta)) is not None})
    if already:
        raise CarryRefused(f"the checkpoints of {old_link} on {target.name} were carried already (to "
                           f"{', '.join(already)}); nothing changed")
    if not dry_run:
        # Cut the old link first: a run of the old topology still copying is fenced, and one that starts
        # later finds the carry mark and stops (mirrorflow.actions.cut); the positions read are final.
        marked = [TopicPartition(t, p) for t, p in sorted(old)]
        try:
            cuts, _ = cut(target, old_link, marked, carry_mark(new_link), timeout, max_attempts)
        except CutUnstable as exc:
            raise CarryRefused(f"{exc}; nothing was carried") from None
        old = {k: (cuts[k], meta) for k, (_, meta) in old.items() if cuts.get(k) is not None}
    out = Carried(old_link, new_link, source.name, target.name, len(old),
                  {f"{t}[{p}]": offset for (t, p), (offset, _) in sorted(old.items()) if offset is not None},
                  dry_run)
    if not dry_run:
        by_group: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
        for (topic, partition), (offset, metadata) in old.items():
            assert offset is not None
            by_group.setdefault(txn_group(topic, partition), []).append((partition, offset, metadata))
        for (topic, _), rows in sorted(by_group.items()):
            _commit_group(new_link, new_level, source, target, topic, rows, timeout)
    journal_warning("checkpoints_carried", **out.to_dict())
    log.info("%s -> %s on %s: %d checkpoint(s) %s", old_link, new_link, target.name, len(old),
             "would be carried (dry run)" if dry_run else "carried")
    return out


def _commit_group(link_id: str, level: int, source: ClusterClient, target: ClusterClient, topic: str,
                  rows: list[tuple[int, int, str]], timeout: float) -> None:
    """Commit one transaction group's checkpoints through the new link's ``transactional.id``."""
    first_meta = CheckpointMeta.decode(rows[0][2]) or CheckpointMeta()
    task = PartitionTask(link_id=link_id, level=level, source=source.name, target=target.name, topic=topic,
                         partition=rows[0][0], end_offset=0, source_topic_id=first_meta.source_topic_id,
                         target_topic_id=first_meta.target_topic_id)
    lasts: dict[int, LastRead | None] = {}
    held: dict[int, Held | None] = {}
    for partition, _, metadata in rows:
        meta = CheckpointMeta.decode(metadata)
        lasts[partition] = meta.last if meta else None
        held[partition] = Held(topic, partition, dict(meta.held)) if meta and meta.held else None
    fenced_commit(task, target, [TopicPartition(topic, p, o) for p, o, _ in rows], lasts, timeout, held)
