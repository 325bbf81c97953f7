"""The steps of ``mirror_decommission_cluster``: preflight, switch, drain, leave, summary.

Each step takes the plan the preflight returned (XCom, a plain dict) so a
re-run of any one of them works from what was decided, not from a fresh look
at a tree that may already have changed. A dry run stops after the plan.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.actions import DecommissionPlan, DecommissionRefused, SwitchError, plan_decommission, switch_target
from mirrorflow.copy import build_spec, heals_from_archive, run_job, spec_clusters
from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_entry
from mirrorflow.offsets.groups import describe_every_group
from mirrorflow.topology import Topology, effective_links
from mirrorflow.topology.changes import remove_event
from mirrorflow_airflow.hooks.archive import archive_location
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.state import link_targets, record_change, record_names, set_link_targets

log = logging.getLogger(__name__)

#: The task ids whose results the summary checks, in order.
STEPS = ("preflight", "switch", "drain", "leave")
#: Drain passes per level before the cluster counts as still receiving.
DRAIN_PASSES = 5


def run_preflight(topology: Topology, cluster: str, force: bool, dry_run: bool) -> dict[str, Any]:
    """The plan, or a final refusal: a cluster that cannot leave, or still serves groups, changes nothing."""
    try:
        plan = plan_decommission(topology, cluster, link_targets(topology.namespace))
        client = MirrorClusterHook(topology, cluster).client()
        active = {g: i.members for g, i in describe_every_group(client).items() if i.active}
    except (DecommissionRefused, MirrorflowError) as exc:
        raise AirflowFailException(f"preflight: {exc}") from None
    if active:
        listed = ", ".join(f"{g} ({n} members)" for g, n in sorted(active.items()))
        if not force:
            raise AirflowFailException(f"{cluster} still serves consumer groups: {listed}; fail them over "
                                       "(mirror_failover_consumer_group) or stop them, or set force")
        log.warning("force: %s leaves while groups are active on it: %s", cluster, listed)
    for move in plan.moves:
        log.info("link %s (%s, level %d) moves from %s to %s", move.link_id, move.source, move.level,
                 move.old_target, move.new_target)
    for level, links in sorted(plan.drain.items()):
        log.info("level %d: %s drains through %s", level, cluster, ", ".join(links))
    journal_entry("decommission_preflight", cluster=cluster, moves=[m.__dict__ for m in plan.moves],
                  drain=plan.drain, active_groups=active, force=force, dry_run=dry_run)
    return {**plan.to_dict(), "dry_run": dry_run, "force": force}


def recheck(topology: Topology, raw: dict[str, Any]) -> None:
    """Before the first link moves: the cluster and the links still as the plan (the approver's) assumed.

    An approval can wait an hour: groups may have started on the cluster again,
    or a link been switched elsewhere. Either refuses by name, with no link moved;
    active groups are only said when the plan was forced.
    """
    plan = DecommissionPlan.from_dict(raw)
    try:
        client = MirrorClusterHook(topology, plan.cluster).client()
        active = {g: i.members for g, i in describe_every_group(client).items() if i.active}
    except MirrorflowError as exc:
        raise AirflowFailException(f"switch: {plan.cluster} could not be checked again before moving links ({exc}); "
                                   "no link was moved") from None
    problems = []
    if active:
        listed = ", ".join(f"{g} ({n} members)" for g, n in sorted(active.items()))
        if raw["force"]:
            log.warning("force: %s serves consumer groups again since the plan: %s", plan.cluster, listed)
        else:
            problems.append(f"{plan.cluster} serves consumer groups again since it was made: {listed}")
    targets = link_targets(topology.namespace)
    now = {l.link_id: l.default_target for level in topology.levels for l in effective_links(topology, level, targets)}
    for move in plan.moves:
        current = now.get(move.link_id)
        if current not in (move.old_target, move.new_target):  # the new target: moved by an earlier try of this run
            problems.append(f"link {move.link_id} now copies to {current or 'nothing (gone)'}, not {move.old_target}")
    if problems:
        journal_entry("decommission_refused", cluster=plan.cluster, step="switch", reasons=problems)
        raise AirflowFailException(f"switch: the plan is stale: {'; '.join(problems)}; no link was moved. Run the "
                                   "decommission again")


def switch_links(topology: Topology, raw: dict[str, Any]) -> dict[str, Any]:
    """Each link into the cluster cut over exactly, its new target recorded at once so level runs follow it."""
    plan = DecommissionPlan.from_dict(raw)
    if not raw["dry_run"]:
        recheck(topology, raw)
    targets = link_targets(topology.namespace)
    links = {l.link_id: l for level in topology.levels for l in effective_links(topology, level, targets)}
    out: dict[str, Any] = {}
    for move in plan.moves:
        link = links[move.link_id]
        if link.default_target == move.new_target:
            out[move.link_id] = "already moved"
            continue
        clients = {c: MirrorClusterHook(topology, c).client() for c in {link.source, link.default_target,
                                                                        move.new_target}}
        try:
            report = switch_target(link, move.new_target, clients, list(topology.topics), dry_run=raw["dry_run"],
                                   force=raw["force"])
        except SwitchError as exc:
            raise AirflowFailException(f"switching {move.link_id}: {exc}") from None
        for warning in report.warnings:
            log.warning("%s", warning)
        if not raw["dry_run"]:
            targets[move.link_id] = move.new_target
            set_link_targets(topology.namespace, targets)
        out[move.link_id] = {"mode": report.mode, "cuts": report.cuts}
        log.info("link %s now copies to %s", move.link_id, move.new_target)
    return out


def propose(topology: Topology, raw: dict[str, Any]) -> dict[str, Any]:
    """The plan an approver reads (``approvals``): the moves with their cuts (a dry run), and what drains."""
    cuts = switch_links(topology, {**raw, "dry_run": True})
    plan = DecommissionPlan.from_dict(raw)
    lines = [f"Take **{plan.cluster}** out of the tree.", "", "| link | from | to | cut (topic[partition]: the new "
             "target starts at source offset) |", "|---|---|---|---|"]
    for move in plan.moves:
        found = cuts.get(move.link_id) or "not planned"
        cut = found if isinstance(found, str) else ", ".join(
            f"{t}[{p}]: {'the beginning' if c is None else c}" for t, ps in sorted(found["cuts"].items())
            for p, c in sorted(ps.items())) or "nothing to cut"
        lines.append(f"| {move.link_id} | {move.old_target} | {move.new_target} | {cut} |")
    lines += ["", *(f"Level {level}: {plan.cluster} drains through {', '.join(links)}."
                    for level, links in sorted(plan.drain.items()))]
    return {"subject": f"Decommission {plan.cluster}?", "text": "\n".join(lines), "cuts": cuts}


def drain(topology: Topology, raw: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The cluster's own links copy what it still holds, in passes, until a pass finds nothing new.

    A cluster that keeps receiving after :data:`DRAIN_PASSES` passes still has
    producers: leaving then would lose their messages, so it fails unless forced.
    """
    plan = DecommissionPlan.from_dict(raw)
    if raw["dry_run"]:
        return {"dry_run": True}
    targets = link_targets(topology.namespace)
    copied, remaining = {}, {}
    for level, ids in sorted(plan.drain.items()):
        links = [l for l in effective_links(topology, level, targets) if l.link_id in ids]
        clusters = {c: dict(MirrorClusterHook(topology, c).client().settings) for c in spec_clusters(topology, links)}
        copied[level] = 0
        archive = archive_location(topology).to_dict() if heals_from_archive(topology, links) else None
        for attempt in range(DRAIN_PASSES):
            result = run_job(build_spec(topology, level, f"{run_id}-drain-{level}-{attempt}", links, clusters,
                                        archive=archive))
            # a scheduled level run copying the same link at the same time fences this one (or the other
            # way round): both are exactly once; the next pass picks up where the winner stopped
            raced = [e for e in result.errors if "fenced" in e.error.lower()]
            others = [e for e in result.errors if e not in raced]
            if others:
                raise AirflowFailException(f"draining level {level}: " + "; ".join(str(e) for e in others))
            copied[level] += result.copied
            remaining[level] = result.copied + len(raced)
            if not remaining[level]:
                break
        log.info("level %d: %d messages left %s through %s", level, copied[level], plan.cluster, ", ".join(ids))
    late = {level: n for level, n in remaining.items() if n}
    if late and not raw["force"]:
        raise AirflowFailException(f"{plan.cluster} kept receiving messages while draining (still copying after "
                                   f"{DRAIN_PASSES} passes: {late} per level): stop its producers, then re-run "
                                   "(or set force)")
    return {"copied": copied}


def leave(topology: Topology, raw: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The cluster leaves the tree durably; stored targets that name it, a gone link or a default are dropped."""
    plan = DecommissionPlan.from_dict(raw)
    if raw["dry_run"]:
        return {"dry_run": True}
    after = topology.without_cluster(plan.cluster)
    current = link_targets(topology.namespace)
    kept = {k: v for k, v in {**current, **plan.targets}.items()
            if v != plan.cluster and k in {l.link_id for l in after.all_links()} and v != after.link(k).default_target}
    set_link_targets(topology.namespace, kept)
    record_change(topology.namespace,
                  {**remove_event(plan.cluster), "at": datetime.now(UTC).isoformat(), "run_id": run_id})
    record_names(topology.namespace, {plan.cluster: None})  # onboarded again, it may come back under other names
    log.info("%s left the tree; links now: %s", plan.cluster, ", ".join(str(l) for l in after.all_links()))
    return {"left": True, "targets": kept}


def summary(results: dict[str, Any], run_id: str, approved_by: str | None = None) -> dict[str, Any]:
    """One journal line for the whole decommission; fails when a step did, so the run shows as failed."""
    missing = [s for s in STEPS if results.get(s) is None]
    cluster = (results.get("preflight") or {}).get("cluster")
    journal_entry("decommission", run_id=run_id, cluster=cluster, steps=results, failed_steps=missing,
                  approved_by=approved_by)
    if missing:
        raise AirflowFailException(f"decommissioning did not complete: step(s) {', '.join(missing)} failed or "
                                   "did not run; re-run the DAG to continue")
    return {"cluster": cluster, "ok": True}
