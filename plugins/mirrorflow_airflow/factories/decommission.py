"""``mirror_decommission_cluster``: take a cluster out of the tree (manual, with a form); no file edit.

Steps, each its own task and log:

1. ``preflight``: the cluster can leave (not the schema primary, link ids
   survive), and no consumer group is active on it (unless ``force``). The
   plan: which links move where, which of its own links drain.
2. ``switch``: every link that copies into the cluster moves to another leaf
   of the same subtree with an exact cut (:mod:`mirrorflow.copy.switch`); the
   new targets are recorded at once, so level runs use them from now on.
3. ``drain``: the cluster's own links copy what it still holds (in this task,
   up to the end captured now); refuses to go on while producers keep writing
   to it (unless ``force``).
4. ``leave``: the cluster leaves the tree (Airflow Variable
   ``mirrorflow_topology_changes``); every DAG drops its links at its next parse.
5. ``summary``: one audit line.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.audit import audit
from mirrorflow.copy.job import run_job
from mirrorflow.copy.links import build_spec, effective_links
from mirrorflow.copy.switch import SwitchError, switch_target
from mirrorflow.decommission import DecommissionPlan, DecommissionRefused, plan_decommission
from mirrorflow.errors import MirrorflowError
from mirrorflow.offsets.groups import describe_groups
from mirrorflow.topology import Topology
from mirrorflow.topology.changes import remove_event
from mirrorflow.topology.model import INTERNAL_TOPIC_PREFIX
from mirrorflow_airflow.defaults import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.state import link_targets, record_change, set_link_targets

log = logging.getLogger(__name__)

DAG_ID = "mirror_decommission_cluster"
STEPS = ("preflight", "switch", "drain", "leave")
#: Drain passes per level before the cluster counts as still receiving.
DRAIN_PASSES = 5


def run_preflight(topology: Topology, cluster: str, force: bool, dry_run: bool) -> dict[str, Any]:
    try:
        plan = plan_decommission(topology, cluster, link_targets())
        client = MirrorClusterHook(topology, cluster).client()
        active = {g: i.members for g, i in describe_groups(
            client, lambda g: not g.startswith(INTERNAL_TOPIC_PREFIX)).items() if i.active}
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
    audit("decommission_preflight", cluster=cluster, moves=[m.__dict__ for m in plan.moves],
          drain=plan.drain, active_groups=active, force=force, dry_run=dry_run)
    return {**plan.to_dict(), "dry_run": dry_run, "force": force}


def switch_links(topology: Topology, raw: dict[str, Any]) -> dict[str, Any]:
    plan = DecommissionPlan.from_dict(raw)
    targets = link_targets()
    links = {l.link_id: l for level in topology.levels for l in effective_links(topology, level, targets)}
    out = {}
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
            set_link_targets(targets)
        out[move.link_id] = {"mode": report.mode, "cuts": report.cuts}
        log.info("link %s now copies to %s", move.link_id, move.new_target)
    return out


def drain(topology: Topology, raw: dict[str, Any], run_id: str) -> dict[str, Any]:
    plan = DecommissionPlan.from_dict(raw)
    if raw["dry_run"]:
        return {"dry_run": True}
    targets = link_targets()
    copied, remaining = {}, {}
    for level, ids in sorted(plan.drain.items()):
        links = [l for l in effective_links(topology, level, targets) if l.link_id in ids]
        clusters = {c: dict(MirrorClusterHook(topology, c).client().settings)
                    for c in {x for l in links for x in (l.source, l.default_target)}}
        copied[level] = 0
        for attempt in range(DRAIN_PASSES):
            result = run_job(build_spec(topology, level, f"{run_id}-drain-{level}-{attempt}", links, clusters))
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
    plan = DecommissionPlan.from_dict(raw)
    if raw["dry_run"]:
        return {"dry_run": True}
    after = topology.without_cluster(plan.cluster)
    current = link_targets()
    kept = {k: v for k, v in {**current, **plan.targets}.items()
            if v != plan.cluster and k in {l.link_id for l in after.all_links()} and v != after.link(k).default_target}
    set_link_targets(kept)
    record_change({**remove_event(plan.cluster), "at": datetime.now(timezone.utc).isoformat(), "run_id": run_id})
    log.info("%s left the tree; links now: %s", plan.cluster, ", ".join(str(l) for l in after.all_links()))
    return {"left": True, "targets": kept}


def summary(results: dict[str, Any], run_id: str) -> dict[str, Any]:
    missing = [s for s in STEPS if results.get(s) is None]
    cluster = (results.get("preflight") or {}).get("cluster")
    audit("decommission", run_id=run_id, cluster=cluster, steps=results, failed_steps=missing)
    if missing:
        raise AirflowFailException(f"decommissioning did not complete: step(s) {', '.join(missing)} failed or "
                                   "did not run; re-run the DAG to continue")
    return {"cluster": cluster, "ok": True}


def build_decommission_dag(topology: Topology) -> DAG:
    clusters = sorted(topology.clusters)
    with DAG(
        dag_id=DAG_ID,
        description="Take a cluster out of the tree: move links into it, drain it, leave (no loss)",
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=tags("operations"),
        doc_md=__doc__,
        params={
            "cluster": Param(clusters[-1], type="string", enum=clusters, title="Cluster to remove"),
            "force": Param(False, type="boolean", title="Force",
                           description="Leave even with active consumer groups or producers still writing"),
            "dry_run": Param(False, type="boolean", title="Dry run", description="Show the plan; change nothing"),
        },
    ) as dag:

        @task
        def preflight_(params: dict | None = None) -> dict:
            """Can it leave, and how."""
            p = dict(params or {})
            return run_preflight(topology, str(p.get("cluster")), bool(p.get("force")), bool(p.get("dry_run")))

        @task
        def switch_(plan: dict) -> dict:
            """Links into the cluster move to a sibling leaf, with exact cuts."""
            return switch_links(topology, plan)

        @task
        def drain_(plan: dict, switched: dict, run_id: str | None = None) -> dict:
            """The cluster's own links pass on what it still holds."""
            return drain(topology, plan, run_id or "")

        @task
        def leave_(plan: dict, drained: dict, run_id: str | None = None) -> dict:
            """The cluster leaves the tree; every DAG sees it from its next parse."""
            return leave(topology, plan, run_id or "")

        @task(trigger_rule="all_done")
        def summary_(run_id: str | None = None, ti: Any = None) -> dict:
            """One audit line; fails if a step did."""
            return summary({s: ti.xcom_pull(task_ids=s) for s in STEPS}, run_id or "")

        plan = preflight_.override(task_id="preflight")()
        switched = switch_.override(task_id="switch")(plan)
        drained = drain_.override(task_id="drain")(plan, switched)
        leave_.override(task_id="leave")(plan, drained) >> summary_.override(task_id="summary")()
    return dag
