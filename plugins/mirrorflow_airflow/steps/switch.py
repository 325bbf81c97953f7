"""The step of ``mirror_switch_target``: move one link to another leaf of its sibling subtree.

The form offers every cluster and level; which choices the tree allows is
decided here, at run time, and a refusal names the allowed targets.
"""

from __future__ import annotations

import logging

from mirrorflow.actions import SwitchError, switch_target
from mirrorflow.errors import ClusterUnreachable
from mirrorflow.journal import journal_entry
from mirrorflow.kafka import ClusterClient, probe
from mirrorflow.topology import Topology, effective_links
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.state import link_targets, set_link_target

log = logging.getLogger(__name__)


def run_switch(topology: Topology, source_cluster: str, level: int, target: str, *, dry_run: bool = False,
               force: bool = False, approved_by: str | None = None, approved: dict | None = None) -> dict:
    """The choice checked against the tree, the link cut over exactly, the new target recorded.

    The target is recorded only after the cut, and not in a dry run or when
    nothing moved, so the level DAGs never copy to a target the cut did not reach.
    ``approved`` is the plan an approver saw (:func:`propose_switch`): it must
    still hold when the link moves (:func:`recheck`).
    """
    topology.cluster(source_cluster)
    topology.cluster(target)
    candidates = [l for l in effective_links(topology, int(level), link_targets(topology.namespace))
                  if l.source == source_cluster]
    if not candidates:
        raise SwitchError(f"{source_cluster} runs no level-{level} distributor (its levels: "
                          f"{', '.join(str(d.level) for d in topology.distributors(source_cluster))})")
    link = next((l for l in candidates if l.accepts(target)), None)
    if link is None:
        allowed = sorted({t for l in candidates for t in l.sibling_leaves})
        raise SwitchError(f"{target} is not in a level-{level} sibling subtree of {source_cluster}; allowed "
                          f"targets: {', '.join(allowed)}")
    log.info("link %s: current target %s, requested %s (allowed: %s)%s", link.link_id, link.default_target, target,
             ", ".join(link.sibling_leaves), " [dry run]" if dry_run else "")
    clients = {c: MirrorClusterHook(topology, c).client() for c in {link.source, link.default_target, target}}
    if approved is not None and not dry_run:
        recheck(link.link_id, link.default_target, clients[link.default_target], approved)
    report = switch_target(link, target, clients, list(topology.topics), dry_run=dry_run, force=force)
    for topic, cuts in report.cuts.items():
        for partition, cut in cuts.items():
            log.info("%-40s %5d  %s starts at source offset %s", topic, partition, target,
                     "the beginning" if cut is None else cut)
    for warning in report.warnings:
        log.warning("%s", warning)
    if not dry_run and report.mode != "noop":
        targets = set_link_target(topology.namespace, link.link_id, target, topology.link(link.link_id).default_target)
        journal_entry("link_target", link=link.link_id, target=target, targets=targets, approved_by=approved_by)
        log.info("link %s now copies to %s from the next mirror_level_%d run", link.link_id, target, link.level)
    return report.to_dict()


def recheck(link_id: str, current: str, old: ClusterClient, approved: dict) -> None:
    """The link still as the approver saw it, else :class:`SwitchError` by name (nothing switched).

    Its current target must be the approved one (no other switch or decommission
    moved it meanwhile), and a cut approved as exact (from the old target's
    checkpoint) is not taken from provenance now because that target stopped
    answering, even with ``force``. The cut's offsets themselves may have grown:
    the switch fences the link's copies and takes them exactly when it acts.
    """
    problem = None
    if current != approved["old_target"]:
        problem = f"{link_id} now copies to {current}, not {approved['old_target']} as approved"
    elif approved["mode"] == "checkpoint":
        try:
            probe(old, 10.0)
        except ClusterUnreachable as exc:
            problem = (f"the cut was approved as exact, from {current}'s checkpoint, and {current} is now unreachable "
                       f"({exc.detail}): a cut from provenance would need a new approval")
    if problem:
        journal_entry("link_target_refused", link=link_id, reason=problem)
        raise SwitchError(f"the plan is stale: {problem}; nothing was switched. Run the switch again")


def propose_switch(topology: Topology, source_cluster: str, level: int, target: str, *, force: bool = False) -> dict:
    """The plan an approver reads (``approvals``): the cut as a dry run computes it, changing nothing."""
    report = run_switch(topology, source_cluster, level, target, dry_run=True, force=force)
    lines = [f"Switch link **{report['link']}** from **{report['old_target']}** to **{report['new_target']}** "
             f"(cut from the {report['mode']}).", "", "| topic | partition | the new target starts at source offset |",
             "|---|---:|---:|"]
    lines += [f"| {topic} | {p} | {'the beginning' if cut is None else cut} |"
              for topic, cuts in sorted(report["cuts"].items()) for p, cut in sorted(cuts.items())]
    lines += [f"\n{w}" for w in report["warnings"]]
    return {"subject": f"Switch {report['link']} from {report['old_target']} to {report['new_target']}?",
            "text": "\n".join(lines), "report": report}
