"""The steps of ``mirror_failover_consumer_group``: preflight, (propose,) publish, switch, verify, read-only guard.

A failover must never skip a message; replaying some is the bounded price of
an emergency. So every check that can refuse runs before anything is
committed, a refusal says why and changes nothing, and the per-partition table
(source position, target position, expected replay) is logged before the
commit, in dry runs too.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from mirrorflow.cluster_sync import move_groups
from mirrorflow.errors import ClusterUnreachable, MirrorflowError
from mirrorflow.internal_names import ACL_GRANTS_TOPIC
from mirrorflow.journal import journal_entry
from mirrorflow.kafka import probe
from mirrorflow.offsets.distribute import distribute
from mirrorflow.offsets.failover import (
    MODES,
    FailoverPlan,
    FailoverRefused,
    distributed_positions,
    match_groups,
    plan_failover,
    recheck_source,
    refuse_active,
    source_cut,
    stale_positions,
    table,
    verify,
)
from mirrorflow.offsets.groups import describe_groups
from mirrorflow.offsets.sync import apply_commits, current_positions, publish_owned
from mirrorflow.offsets.topic import ensure_topic, read_positions
from mirrorflow.topology import Topology, effective_links
from mirrorflow.topology.offsets import PRECISIONS
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook, reachable_clients
from mirrorflow_airflow.names import hold_names
from mirrorflow_airflow.state import group_owners, link_targets, set_group_owners

log = logging.getLogger(__name__)


def preflight(topology: Topology, params: dict[str, Any]) -> dict[str, Any]:
    """The checked request; raises :class:`FailoverRefused` (nothing changed) when it is unsafe or unclear."""
    source, target = params["from_cluster"], params["to_cluster"]
    mode, precision = params["mode"], params["precision"]
    topology.cluster(source)
    topology.cluster(target)
    if source == target:
        raise FailoverRefused(f"from_cluster and to_cluster are both {source}")
    hold_names(topology, [source, target], "nothing was changed")
    if mode not in MODES:
        raise FailoverRefused(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if precision not in PRECISIONS:
        raise FailoverRefused(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    patterns = [params["groups"]] if isinstance(params["groups"], str) else list(params["groups"] or [])
    target_client = MirrorClusterHook(topology, target).client()
    source_client = MirrorClusterHook(topology, source).client()
    try:
        probe(target_client)
    except ClusterUnreachable as exc:
        raise FailoverRefused(f"the target {target} is unreachable: {exc.detail}") from exc
    try:
        probe(source_client)
        source_up = True
    except ClusterUnreachable as exc:
        source_up = False
        if mode == "planned":
            raise FailoverRefused(f"the source {source} is unreachable ({exc.detail}); a planned failover needs it. "
                                  f"Use mode emergency to fail over from the positions already distributed") from exc
    known: Collection[str]
    if mode == "planned":
        known = describe_groups(source_client, topology.offsets.selects)
        groups = match_groups(patterns, known)
        where = f"on {source}"
    else:
        known = {p.group for p in read_positions(target_client).values() if p.owner == source}
        groups = match_groups(patterns, known)
        where = f"in the positions from {source} that reached {target}"
        if source_up:
            log.warning("emergency mode but %s answers: a planned failover would use its latest commits", source)
    if not groups:
        raise FailoverRefused(f"no consumer group {where} matches {', '.join(map(repr, patterns))} "
                              f"(known: {', '.join(sorted(known)) or 'none'})")
    refuse_active(target_client, groups, "target")
    if mode == "planned":
        try:
            refuse_active(source_client, groups, "source")
        except FailoverRefused:
            if not params["force"]:
                raise
            log.warning("force: failing over groups that still have members on %s; what they consume from now on "
                        "is not covered and will be read again on %s", source, target)
    log.info("failover %s -> %s, mode %s, precision %s%s: groups %s", source, target, mode, precision,
             " [dry run]" if params["dry_run"] else "", ", ".join(groups))
    plan: dict[str, Any] = {"groups": groups, "source": source, "target": target, "mode": mode,
                            "precision": precision, "dry_run": bool(params["dry_run"]), "force": bool(params["force"])}
    if mode == "planned":  # what the plan is made of: the steps that act check it again (recheck)
        plan["source_commits"] = source_cut(source_client, groups, topology.selects)
    return plan


def recheck(topology: Topology, plan: dict[str, Any], step: str) -> None:
    """Planned and real: the source still as the plan assumed (no members, the same commits), else a refusal by name.

    The preflight's look is old by the time a step acts (an approval waits up to
    ``approvals.timeout_minutes``, the replication wait up to 30 minutes). With
    ``force`` the groups may keep consuming, as the preflight allowed: only said.
    """
    if plan["mode"] != "planned" or plan["dry_run"]:
        return
    client = MirrorClusterHook(topology, plan["source"]).client()
    try:
        recheck_source(client, plan["groups"], plan.get("source_commits"), topology.selects)
    except FailoverRefused as exc:
        if plan["force"]:
            log.warning("force: %s; going ahead, what they consumed since is read again on %s", exc, plan["target"])
            return
        journal_entry("failover_refused", step=step, groups=plan["groups"], source=plan["source"],
                      target=plan["target"], reason=str(exc))
        done = "nothing was published, nothing" if step == "publish_final" else "nothing"
        raise FailoverRefused(f"{step}: {exc}; {done} was committed on {plan['target']}") from None
    log.info("%s: the source %s is as the plan assumed (no members, the same commits)", step, plan["source"])


def publish_final(topology: Topology, plan: dict[str, Any]) -> dict[str, Any]:
    """Planned: the groups' last commits on the source, published and carried along the tree to the target.

    Only then can the wait prove the target holds everything they consumed;
    an emergency has no source to publish from, and a dry run publishes nothing.
    """
    if plan["mode"] != "planned" or plan["dry_run"]:
        log.info("%s%s: positions are not republished", plan["mode"], " dry run" if plan["dry_run"] else "")
        return {"published": 0}
    recheck(topology, plan, "publish_final")
    clients, down = reachable_clients(topology)
    for client in clients.values():
        ensure_topic(client)
    positions = publish_owned(clients[plan["source"]], plan["groups"], topology.selects)
    targets = link_targets(topology.namespace)
    report = distribute({lvl: effective_links(topology, lvl, targets) for lvl in topology.levels}, clients,
                        skip=down)
    log.info("published %d final positions on %s and distributed %d records", len(positions), plan["source"],
             report.copied)
    for link_id, error in sorted(report.errors.items()):
        log.warning("%s: %s (the wait below tells whether %s got what it needs)", link_id, error, plan["target"])
    return {"published": len(positions), "distributed": report.copied}


def propose(topology: Topology, plan: dict[str, Any]) -> dict[str, Any]:
    """The plan an approver reads (``approvals``): the switch's own table, computed as a dry run, changing nothing.

    Per group: what it would read again on the target (replay) and skip (none in
    ``exact`` precision: the cut is proven; unknown in ``timestamp``).
    """
    summary = switch(topology, {**plan, "dry_run": True})
    result = FailoverPlan.from_dict(summary["plan"])
    replay: dict[str, int] = {}
    for row in result.rows:
        replay[row.group] = replay.get(row.group, 0) + row.expected_replay
    skip = "none (exact: the cut is proven)" if plan["precision"] == "exact" else "unknown (timestamp precision)"
    lines = [f"Fail over **{', '.join(plan['groups'])}** from **{plan['source']}** to **{plan['target']}** "
             f"({plan['mode']}, {plan['precision']}).", "",
             "| group | partitions | would read again | would skip |", "|---|---:|---:|---|"]
    lines += [f"| {g} | {sum(1 for r in result.rows if r.group == g)} | {n} | {skip} |"
              for g, n in sorted(replay.items())]
    if result.missing:
        lines += ["", f"{plan['target']} does not hold yet the last message consumed of: "
                      f"{', '.join(sorted(result.missing))}; the failover waits for it first."]
    lines += ["", "```", table(result), "```"]
    return {"subject": f"Fail over {', '.join(plan['groups'])} from {plan['source']} to {plan['target']}?",
            "text": "\n".join(lines), "replay": replay}


def switch(topology: Topology, plan: dict[str, Any], approved_by: str | None = None) -> dict[str, Any]:
    """Each position resolved on the target, the table logged, then committed; the target becomes the owner.

    Active members on the target are checked again right before the commit: a
    group that started there meanwhile must not have its offsets moved.
    """
    source, target, groups = plan["source"], plan["target"], plan["groups"]
    target_client = MirrorClusterHook(topology, target).client()
    if plan["mode"] == "planned" and plan["dry_run"]:
        source_client = MirrorClusterHook(topology, source).client()
        positions = current_positions(source_client, groups, topology.selects, read_positions(source_client))
    else:
        positions = distributed_positions(target_client, source, groups)
    if not positions:
        raise FailoverRefused(f"no positions of {', '.join(groups)} from {source} are available on {target}")
    assumed = plan.get("source_commits")
    moved = stale_positions(positions, assumed) if plan["mode"] == "planned" and assumed is not None else []
    if moved and not plan["force"]:
        where = f"on {source}" if plan["dry_run"] else f"that reached {target}"
        reason = f"the positions {where} are not the commits the plan was made of: {'; '.join(moved)}"
        journal_entry("failover_refused", step="switch", groups=groups, source=source, target=target, reason=reason,
                      dry_run=plan["dry_run"])
        raise FailoverRefused(f"the plan is stale: {reason}; nothing was committed on {target}. Run the failover "
                              "again")
    margin = max(topology.offsets.precision_for(g)[1] for g in groups)
    result: FailoverPlan = plan_failover(target_client, positions, source=source, mode=plan["mode"],
                                         precision=plan["precision"], margin_s=margin, groups=groups)
    log.info("per-partition positions%s:\n%s", " [dry run: nothing changed]" if plan["dry_run"] else "",
             table(result))
    oldest = max((r.position_age_s for r in result.rows), default=0.0)
    if plan["mode"] == "emergency":
        log.warning("emergency: the positions used are up to %.0fs old; what the groups consumed on %s in the last "
                    "%.0fs before it failed is read again on %s", oldest, source, oldest, target)
    for name, origins in sorted(result.missing.items()):
        log.warning("%s: %s lacks the last consumed message of %s; those messages are read on %s when they arrive",
                    name, target, ", ".join(origins), target)
    summary = {"plan": result.to_dict(), "oldest_position_s": oldest, "dry_run": plan["dry_run"]}
    if plan["dry_run"]:
        return summary
    refuse_active(target_client, groups, "target")  # again, right before the commit
    recheck(topology, plan, "switch")  # and the source: apps restarted there while the approval waited
    apply_commits(target_client, result.commit_rows())
    owners = group_owners(topology.namespace)
    owners.update({g: target for g in groups})
    set_group_owners(topology.namespace, owners)
    journal_entry("failover", groups=groups, source=source, target=target, mode=plan["mode"],
                  precision=plan["precision"], force=plan["force"], oldest_position_s=oldest, approved_by=approved_by,
                  partitions=[{"group": r.group, "topic": r.topic, "partition": r.partition, "source": r.source_offset,
                               "target": r.target_offset, "replay": r.expected_replay} for r in result.rows])
    return summary


def verify_switch(topology: Topology, summary: dict[str, Any]) -> dict[str, Any]:
    """The target's committed offsets re-read against the table, so a lost commit fails the run (and retries)."""
    if summary["dry_run"]:
        log.info("dry run: nothing to verify")
        return {"verified": False}
    plan = summary["plan"]
    result = FailoverPlan.from_dict(plan)
    problems = verify(MirrorClusterHook(topology, plan["target"]).client(), result)
    if problems:
        raise AirflowException("the target's committed offsets differ from the plan:\n  " + "\n  ".join(problems))
    log.info("verified: %d partitions of %s committed on %s as planned; %s now runs there for mirror_offsets",
             len(result.rows), ", ".join(plan["groups"]), plan["target"], ", ".join(plan["groups"]))
    return {"verified": True, "partitions": len(result.rows)}


def read_only_guard(topology: Topology, summary: dict[str, Any]) -> dict[str, Any]:
    """A failover to a read-only cluster opens the groups' topics to writers there; one away from it closes them.

    After the commit and its check, so a refused or failed failover leaves the
    guard as it was. Says which topics on which cluster, in the log and a journal line.
    """
    rules = topology.grant_rules()
    result = FailoverPlan.from_dict(summary["plan"])
    read_only = rules.read_only if rules is not None else ()
    moves = [(c, arriving) for c, arriving in ((result.target, True), (result.source, False)) if c in read_only]
    if rules is None or not moves:
        log.info("neither %s nor %s is read-only: no guard to move", result.source, result.target)
        return {"moved": []}
    consumed: dict[str, set[str]] = {}
    for row in result.rows:
        consumed.setdefault(row.group, set()).add(row.topic)
    topics = sorted({t for ts in consumed.values() for t in ts if rules.mirrors(t)})
    clients = {name: MirrorClusterHook(topology, name).client() for name in topology.clusters}
    done = []
    for cluster, arriving in moves:
        what = "open to writers (guard lifted)" if arriving else "read-only again (guard re-armed)"
        if summary["dry_run"]:
            log.info("[dry run] on %s, %s would be %s", cluster, ", ".join(topics) or "no topic", what)
            continue
        try:
            change = move_groups(clients[cluster], rules, clients, consumed, arriving)
        except MirrorflowError as exc:
            if arriving:
                raise AirflowException(f"the groups now consume on {cluster}, but its read-only guard could not be "
                                       f"lifted for {', '.join(topics)}: {exc}") from exc
            log.error("the guard on %s could not be re-armed for %s (%s): those topics stay open to writers there "
                      "until a failover of %s to %s and back again, or until their lifted record in %s is deleted",
                      cluster, ", ".join(topics), exc, ", ".join(result.groups), cluster,
                      clients[cluster].own(ACL_GRANTS_TOPIC))
            continue
        moved = change.lifted if arriving else change.rearmed
        log.info("%s: %s now %s; %d denies created, %d deleted", cluster, ", ".join(moved) or "no topic", what,
                 len(change.result.created), len(change.result.deleted))
        for problem in change.result.problems:
            log.error("%s: %s", cluster, problem)
        journal_entry("read_only_lifted" if arriving else "read_only_rearmed", cluster=cluster, groups=result.groups,
                      topics=list(moved), denies_created=[str(g) for g in change.result.created],
                      denies_deleted=[str(g) for g in change.result.deleted])
        done.append({"cluster": cluster, "lifted" if arriving else "rearmed": list(moved),
                     "problems": change.result.problems})
    return {"moved": done}


@contextmanager
def refusal_is_final() -> Iterator[None]:
    """A refusal changed nothing and would refuse again: fail the task without using its retries."""
    try:
        yield
    except FailoverRefused as exc:
        raise AirflowFailException(f"failover refused, nothing changed: {exc}") from exc
