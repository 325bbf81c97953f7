"""The steps of ``mirror_onboard_cluster``: preflight, topics, schemas, positions, join, verify, summary.

Nothing changes before the preflight passed, and every step after it works
from the plan the preflight returned (XCom), so a re-run continues where the
last attempt stopped. Until the join the new cluster is not in the topology:
the steps work on the topology as the plan will make it (``plan.grown``), and
:func:`plan_clients` gives its two clusters' clients.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.cluster_sync import sync_topic_shapes
from mirrorflow.errors import MirrorflowError, TopologyError
from mirrorflow.journal import journal_entry
from mirrorflow.kafka import ClusterClient
from mirrorflow.offsets.groups import describe
from mirrorflow.offsets.position import OFFSETS_TOPIC
from mirrorflow.offsets.sync import commit_positions
from mirrorflow.offsets.topic import ensure_topic
from mirrorflow.onboard.plan import OnboardPlan, OnboardRefused, OnboardRequest, preflight
from mirrorflow.onboard.verify import summarize, verify
from mirrorflow.topology import Topology, check_trees
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.hooks.registry import sync_from_primary
from mirrorflow_airflow.state import (
    group_owners,
    link_targets,
    onboarding,
    record_change,
    record_names,
    record_onboarding,
    set_link_targets,
)
from mirrorflow_airflow.topology import current_trees

log = logging.getLogger(__name__)

#: The task ids whose results the summary checks, in order.
STEPS = ("preflight", "create_topics", "schemas", "backfill", "positions", "join", "verify")


def _apart_from_other_trees(topology: Topology, grown: Topology, cluster: str) -> None:
    """Refuse, before anything is created, a new cluster that another tree of this Airflow has too, where the two
    trees' names would meet (docs/naming.md, "Two trees on one cluster")."""
    others = [t for t in current_trees() if t.namespace != topology.namespace]
    if others:
        try:
            check_trees({f"{t.name} (namespace {t.namespace!r})": t for t in (grown, *others)})
        except TopologyError as exc:
            raise OnboardRefused(f"{cluster} would share names with another tree of this Airflow: {exc}") from None


def plan_clients(topology: Topology, plan: OnboardPlan | OnboardRequest) -> dict[str, ClusterClient]:
    """Clients of the sibling and the new cluster, resolved from Airflow connections on the grown topology."""
    grown = plan.grown(topology)
    return {name: MirrorClusterHook(grown, name).client() for name in (plan.sibling_of, plan.cluster)}


def run_preflight(topology: Topology, params: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The form checked against both clusters and the tree; the plan, or a final refusal that changed nothing.

    A real run records the onboarding as started (Variable ``mirrorflow_onboarding``)
    so a re-run recognises the topics this attempt creates as its own.
    """
    try:
        req = OnboardRequest.from_params(params)
        clients = plan_clients(topology, req)
        earlier = onboarding(topology.namespace, req.cluster)
        if earlier and (earlier["sibling_of"], earlier["level"]) != (req.sibling_of, req.level) and not req.adopt:
            raise OnboardRefused(f"an earlier onboarding of {req.cluster} (run {earlier['run_id']}) joins it next "
                                 f"to {earlier['sibling_of']} at level {earlier['level']}; finish that one, or set "
                                 "adopt to start over with this form")
        coverage = None
        if req.backfill == "archive":
            from mirrorflow.archive import coverage as archived
            from mirrorflow_airflow.hooks.archive import archive_location

            location = archive_location(topology)
            coverage = lambda t, p: archived(location, req.sibling_of, t, p)  # noqa: E731
        plan = preflight(topology, req, clients[req.cluster], clients[req.sibling_of],
                         targets=link_targets(topology.namespace),
                         resumed_topics=(earlier or {}).get("topics"), archive_coverage=coverage)
        _apart_from_other_trees(topology, plan.grown(topology), plan.cluster)
    except OnboardRefused as exc:
        raise AirflowFailException(str(exc)) from None
    except MirrorflowError as exc:
        raise AirflowFailException(f"preflight: {exc}") from None
    log.info("onboarding %s (cluster id %s, %d brokers) next to %s at level %d; backfill %s through link %s; "
             "%d topics%s", plan.cluster, plan.cluster_id, plan.brokers, plan.sibling_of, plan.level, plan.backfill,
             plan.link_id, len(plan.topics), " [dry run]" if plan.dry_run else "")
    for topic, partitions in plan.topics.items():
        log.info("  %-40s %4d partitions%s", topic, partitions, " (adopted)" if topic in plan.adopted else "")
    for link_id, target in plan.pins.items():
        log.info("  link %s stays on %s (pinned: its default target changes with the new leaf)", link_id, target)
    for note in plan.notes:
        log.info("  note: %s", note)
    if not plan.dry_run and not plan.joined:
        record_onboarding(topology.namespace, plan.cluster, {
            "sibling_of": plan.sibling_of, "level": plan.level, "run_id": run_id,
            "topics": sorted(set((earlier or {}).get("topics", [])) | set(plan.topics)),
            "started": datetime.now(UTC).isoformat()})
    journal_entry("onboard_preflight", run_id=run_id, cluster=plan.cluster, sibling_of=plan.sibling_of,
                  level=plan.level,
                  backfill=plan.backfill, link=plan.link_id, topics=plan.topics, adopted=plan.adopted, pins=plan.pins,
                  dry_run=plan.dry_run, notes=plan.notes)
    return plan.to_dict()


class _Selected:
    """The plan's topics in the shape :func:`sync_topic_shapes` selects with (a topology's ``selects``)."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics

    def selects(self, topic: str) -> bool:
        return topic in self.topics


def create_topics(topology: Topology, plan: OnboardPlan) -> dict[str, Any]:
    """The plan's topics on the new cluster with the sibling's partitions and configs, before any copy."""
    if plan.dry_run:
        return {"dry_run": True, "would_create": sorted(plan.topics)}
    clients = plan_clients(topology, plan)
    shape = sync_topic_shapes(clients[plan.sibling_of], clients[plan.cluster], _Selected(plan.topics),
                              align_configs=True)
    if shape.blocked:
        raise AirflowFailException("creating topics on " + plan.cluster + " failed:\n  " + "\n  ".join(
            f"{t}: {e}" for t, e in sorted(shape.blocked.items())))
    created = sorted(c.topic for c in shape.created)
    if (offsets := clients[plan.cluster].own(OFFSETS_TOPIC)) in plan.topics and ensure_topic(clients[plan.cluster]):
        created.append(offsets)
    log.info("created on %s: %s", plan.cluster, ", ".join(created) or "nothing (all there)")
    return {"created": created}


def sync_schemas(topology: Topology, plan: OnboardPlan, wanted: bool) -> dict[str, Any]:
    """The primary's registrations on the new cluster, the same sync ``mirror_schemas`` runs for one target."""
    if not wanted or not topology.schemas.enabled:
        why = "the form turned it off" if not wanted else "the topology has no schemas.primary"
        log.info("schemas: nothing to do (%s)", why)
        return {"skipped": why}
    if plan.dry_run:
        return {"dry_run": True}
    return sync_from_primary(plan.grown(topology), plan.cluster, dry_run=False)


def position_groups(topology: Topology, plan: OnboardPlan) -> dict[str, Any]:
    """Each owned group committed on the new cluster from its distributed positions (never an active one)."""
    if plan.dry_run:
        return {"dry_run": True}
    grown = plan.grown(topology)
    client = plan_clients(topology, plan)[plan.cluster]
    owners = group_owners(topology.namespace)
    infos = describe(client, sorted(owners))
    report = commit_positions(client, owners, lambda g: g not in infos or not infos[g].active,
                              grown.offsets.precision_for)
    for row in report.rows:
        log.info("%s %s[%d] -> %d (%s, owner %s at %d; %s)", row.group, row.topic, row.partition, row.after,
                 row.precision, row.owner, row.owner_offset, row.how)
    for group, why in sorted(report.skipped.items()):
        log.warning("group %s left alone on %s: %s", group, plan.cluster, why)
    return {"committed": len(report.rows), "groups": sorted({r.group for r in report.rows}),
            "skipped": report.skipped}


def join_tree(topology: Topology, plan: OnboardPlan, run_id: str) -> dict[str, Any]:
    """The cluster joins the tree durably; links whose default target moves with it are pinned where they are."""
    if plan.dry_run:
        return {"dry_run": True, "pins": plan.pins}
    targets = link_targets(topology.namespace)
    pinned = {k: v for k, v in plan.pins.items() if targets.get(k) != v}
    if pinned:  # preflight computed them from the valid targets; a stale stored one is replaced
        set_link_targets(topology.namespace, {**targets, **pinned})
    events = record_change(topology.namespace, {**plan.event(), "at": datetime.now(UTC).isoformat(), "run_id": run_id})
    grown = plan.grown(topology)
    # what its backfill wrote under
    record_names(topology.namespace, {plan.cluster: grown.cluster(plan.cluster).names.filled()})
    log.info("%s joined the tree next to %s at level %d; its links: %s", plan.cluster, plan.sibling_of, plan.level,
             ", ".join(str(d) for d in grown.distributors(plan.cluster)))
    log.info("the link %s -> %s continues from the backfill's checkpoint at the next mirror_level_%d run",
             plan.sibling_of, plan.cluster, plan.level)
    journal_entry("onboard_join", run_id=run_id, cluster=plan.cluster, sibling_of=plan.sibling_of, level=plan.level,
                  pins=pinned, changes=len(events))
    return {"joined": True, "pins": pinned, "levels": grown.levels}


def verify_step(topology: Topology, plan: OnboardPlan) -> dict[str, Any]:
    """Counts and checksums by origin against the sibling, per topic-partition; a mismatch fails the run."""
    if plan.dry_run:
        return {"dry_run": True}
    clients = plan_clients(topology, plan)
    data = {t: n for t, n in plan.topics.items() if t != clients[plan.cluster].own(OFFSETS_TOPIC)}
    report = verify(clients[plan.sibling_of], clients[plan.cluster], data)
    out = {"ok": report.ok, **summarize(report.partitions), "problems": report.problems()}
    if not report.ok:
        raise AirflowFailException(f"{plan.cluster} does not match {plan.sibling_of}:\n  " +
                                   "\n  ".join(report.problems()))
    return out


def summary(topology: Topology, plan_raw: dict | None, results: dict[str, Any], run_id: str) -> dict[str, Any]:
    """One journal line for the onboarding; fails when a step did, else forgets the record of the attempt."""
    missing = [s for s in STEPS if results.get(s) is None]
    out = {"cluster": (plan_raw or {}).get("cluster"), "steps": results, "ok": not missing}
    journal_entry("onboard", run_id=run_id, **out, failed_steps=missing)
    if missing:
        raise AirflowFailException(f"onboarding did not complete: step(s) {', '.join(missing)} failed or did not "
                                   "run; re-run the DAG with the same form to continue")
    if plan_raw and not plan_raw.get("dry_run"):
        record_onboarding(topology.namespace, plan_raw["cluster"], None)
    return out
