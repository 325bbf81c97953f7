"""The step of ``mirror_resolve_gap``: an operator's decision for a partition a level run stopped on.

The link is taken at its effective target (a switched link's checkpoint lives
there); the rules of what may be done are the core's
(:mod:`mirrorflow.actions.gap`), which refuses anything that would drop or
duplicate messages and names why. A refusal fails the task at once: retrying the
same decision cannot change it.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.actions import ResolveRefused, resolve
from mirrorflow.assets import arrivals
from mirrorflow.topology import Topology, effective_links
from mirrorflow_airflow.assets import emit_arrivals
from mirrorflow_airflow.hooks.archive import archive_location
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.state import link_targets

log = logging.getLogger(__name__)


def run_resolve(topology: Topology, link_id: str, topic: str, partition: int, action: str, *,
                offset: int | None = None, dry_run: bool = False, outlet_events: Any = None) -> dict:
    """Resolve ``topic[partition]`` of ``link_id`` with ``action``; returns what was (or would be) done.

    Records restored from the archive reached the target: one asset event through ``outlet_events``, or, if
    Airflow has no asset for it yet, held under ``"announce"`` for the ``announce`` task.
    """
    level = topology.link(link_id).level
    link = next(l for l in effective_links(topology, level, link_targets(topology.namespace)) if l.link_id == link_id)
    source = MirrorClusterHook(topology, link.source).client()
    target = MirrorClusterHook(topology, link.default_target).client()
    log.info("link %s (%s -> %s) %s[%d]: %s%s%s", link_id, link.source, link.default_target, topic, partition, action,
             "" if offset is None else f" {offset}", " [dry run]" if dry_run else "")
    archive = None
    if action in ("restore", "restore_and_skip"):  # the archive's location, from its AWS connection
        archive = archive_location(topology).to_dict()
    try:
        done = resolve(link_id, level, source, target, topic, int(partition), action, requested=offset,
                       dry_run=dry_run, archive=archive,
                       archived=topology.archive.archived(topology.leaves))
    except ResolveRefused as exc:
        raise AirflowFailException(f"{link_id} {topic}[{partition}] {action}: refused, nothing changed: "
                                   f"{exc}") from None
    lost = f"; offsets {done.lost[0]}..{done.lost[1]} are given up" if done.lost else ""
    log.info("the checkpoint %s %s %s (source holds %d..%d)%s", "would move" if dry_run else "moved",
             f"from {done.checkpoint}" if done.checkpoint is not None else "from none", f"to {done.position}",
             done.earliest, done.end, lost)
    if done.note:
        log.info("%s", done.note)
    held: list[dict] = []
    if done.restored:
        log.info("%d record(s) restored from the archive of %s", done.restored, done.source)
        if outlet_events is not None and not dry_run:
            _, held = emit_arrivals(outlet_events, arrivals(
                [{"link_id": link_id, "source": done.source, "target": done.target, "topic": topic,
                  "partition": partition, "copied": done.restored, "restored": done.restored,
                  "next_offset": done.position}],
                {done.target: str(target.settings["bootstrap.servers"])}, by="restore"))
    if done.missing:
        log.warning("offsets %s are in no archive and %s", ", ".join(f"{a}..{b}" for a, b in done.missing),
                    "would be given up" if dry_run else "were given up")
    return {**done.to_dict(), "announce": held}
