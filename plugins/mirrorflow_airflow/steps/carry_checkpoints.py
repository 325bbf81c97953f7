"""The step of ``mirror_carry_checkpoints``: carry checkpoints over after the levels were renumbered.

Every link of a new level gets the checkpoints its former id left on its
(effective) target, for the topics the topology mirrors. All links are checked first; if any cannot be carried
(the new link already has checkpoints), nothing is changed anywhere. The rules
are the core's (:mod:`mirrorflow.actions.renumber`).
"""

from __future__ import annotations

import logging

from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.actions import CarryRefused, carry_checkpoints, parse_level_map
from mirrorflow.kafka import list_topics
from mirrorflow.topology import Topology, effective_links
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.state import link_targets

log = logging.getLogger(__name__)


def run_carry(topology: Topology, level_map: str, *, dry_run: bool = False) -> list[dict]:
    """Carry every renumbered link's checkpoints (or only show what would be carried); returns what was done.

    A refusal fails the task at once (retrying cannot change it).
    """
    try:
        return _carry(topology, level_map, dry_run=dry_run)
    except CarryRefused as exc:
        raise AirflowFailException(f"level_map {level_map!r}: refused, nothing carried: {exc}") from None


def _carry(topology: Topology, level_map: str, *, dry_run: bool) -> list[dict]:
    pairs = parse_level_map(level_map)
    unknown = sorted(new for new in pairs.values() if new not in topology.levels)
    if unknown:
        raise CarryRefused(f"level_map names level(s) {unknown} that the topology does not have (its levels: "
                           f"{sorted(topology.levels)})")
    targets = link_targets(topology.namespace)
    work = []
    for old, new in sorted(pairs.items()):
        for link in effective_links(topology, new, targets):
            work.append((f"{link.source}.L{old}", link, new))
    hooks = {name: MirrorClusterHook(topology, name).client() for name in topology.clusters}
    topics = {}  # per source: the topics the topology mirrors; other topics' checkpoints are not this tree's
    for _, link, _ in work:
        if link.source not in topics:
            topics[link.source] = [t for t in list_topics(hooks[link.source]) if topology.selects(t)]
    problems, found = [], []
    for old_id, link, new in work:  # check everything before changing anything
        try:
            found.append(carry_checkpoints(old_id, link.link_id, new, hooks[link.source], hooks[link.default_target],
                                           topics=topics[link.source], dry_run=True))
        except CarryRefused as exc:
            if "holds no checkpoints of" in str(exc):
                log.info("%s: %s", link.link_id, exc)
                continue
            problems.append(f"{link.link_id}: {exc}")
    if problems:
        raise CarryRefused("nothing carried:\n" + "\n".join(problems))
    if not found:
        raise CarryRefused(f"no target holds checkpoints of the old link ids of level_map {level_map!r}: nothing to "
                           f"carry")
    if dry_run:
        return [c.to_dict() for c in found]
    done = []
    for carried in found:
        link = next(l for _, l, _ in work if l.link_id == carried.new_link)
        done.append(carry_checkpoints(carried.old_link, carried.new_link, link.level, hooks[link.source],
                                      hooks[link.default_target], topics=topics[link.source]).to_dict())
    return done
