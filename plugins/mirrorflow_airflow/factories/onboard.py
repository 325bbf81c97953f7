"""``mirror_onboard_cluster`` (contract): add a cluster from the UI form, with its history; no file edit.

Steps, each its own task and log (the audit record of the onboarding):

1. ``preflight``: the form, both clusters reachable, transactions allowed on the
   new one, where it joins the tree, topics that would clash (refused unless
   ``adopt``; a different partition count is always refused), the archive
   meeting Kafka (``archive``). Nothing is changed before this passes.
2. ``create_topics``: the mirrored topics with the sibling's partitions and
   travelling configs (and ``_mirrorflow.offsets``).
3. ``schemas``: the primary registry's registrations, subjects translated.
4. ``backfill``: the Spark job of :mod:`mirrorflow.onboard.backfill`, exactly once.
5. ``positions``: consumer groups positioned on the new cluster from the owners'
   distributed positions (never a group active there).
6. ``join``: the cluster joins the tree durably (Airflow Variable
   ``mirrorflow_topology_changes``); links whose default target moves with the
   new leaf are pinned where they are. Every DAG sees it from its next parse.
7. ``verify``: per topic-partition, by origin, counts and checksums against the sibling.
8. ``summary``: one audit line for the whole onboarding; fails if a step did.

Re-running after a failure at any step continues: topics created by the
earlier attempt are recognised (Variable ``mirrorflow_onboarding``), the
backfill resumes from its checkpoints, the other steps are idempotent.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow.audit import audit
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.topics import sync_topic_shapes
from mirrorflow.offsets.groups import describe
from mirrorflow.offsets.position import OFFSETS_TOPIC
from mirrorflow.offsets.sync import commit_positions
from mirrorflow.offsets.topic import ensure_topic
from mirrorflow.onboard.plan import BACKFILL_MODES, OnboardPlan, OnboardRefused, OnboardRequest, preflight
from mirrorflow.onboard.verify import summarize, verify
from mirrorflow.topology import Topology
from mirrorflow_airflow.defaults import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.operators.backfill import MirrorBackfillOperator
from mirrorflow_airflow.state import (group_owners, link_targets, onboarding, record_change, record_onboarding,
                                      set_link_targets)

log = logging.getLogger(__name__)

DAG_ID = "mirror_onboard_cluster"
STEPS = ("preflight", "create_topics", "schemas", "backfill", "positions", "join", "verify")


# --------------------------------------------------------------------------- helpers


def joined(topology: Topology, plan: OnboardPlan | OnboardRequest) -> Topology:
    """The topology with the new cluster in place (as the plan or request says)."""
    if plan.cluster in topology.clusters:
        return topology
    config = plan.config if isinstance(plan, OnboardPlan) else plan.cluster_config()
    return topology.with_cluster(plan.cluster, config, sibling_of=plan.sibling_of, level=plan.level)


def plan_clients(topology: Topology, plan: OnboardPlan | OnboardRequest) -> dict[str, ClusterClient]:
    grown = joined(topology, plan)
    return {name: MirrorClusterHook(grown, name).client() for name in (plan.sibling_of, plan.cluster)}


def _plan(raw: dict) -> OnboardPlan:
    return OnboardPlan.from_dict(raw)


# --------------------------------------------------------------------------- steps


def run_preflight(topology: Topology, params: dict[str, Any], run_id: str) -> dict[str, Any]:
    try:
        req = OnboardRequest.from_params(params)
        clients = plan_clients(topology, req)
        earlier = onboarding(req.cluster)
        if earlier and (earlier["sibling_of"], earlier["level"]) != (req.sibling_of, req.level) and not req.adopt:
            raise OnboardRefused(f"an earlier onboarding of {req.cluster} (run {earlier['run_id']}) joins it next "
                                 f"to {earlier['sibling_of']} at level {earlier['level']}; finish that one, or set "
                                 "adopt to start over with this form")
        coverage = None
        if req.backfill == "archive":
            from mirrorflow.archive.reader import coverage as archived
            from mirrorflow_airflow.hooks.archive import archive_location

            location = archive_location(topology)
            coverage = lambda t, p: archived(location, req.sibling_of, t, p)  # noqa: E731
        plan = preflight(topology, req, clients[req.cluster], clients[req.sibling_of], targets=link_targets(),
                         resumed_topics=(earlier or {}).get("topics"), archive_coverage=coverage)
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
        record_onboarding(plan.cluster, {"sibling_of": plan.sibling_of, "level": plan.level, "run_id": run_id,
                                         "topics": sorted(set((earlier or {}).get("topics", [])) | set(plan.topics)),
                                         "started": datetime.now(timezone.utc).isoformat()})
    audit("onboard_preflight", run_id=run_id, cluster=plan.cluster, sibling_of=plan.sibling_of, level=plan.level,
          backfill=plan.backfill, link=plan.link_id, topics=plan.topics, adopted=plan.adopted, pins=plan.pins,
          dry_run=plan.dry_run, notes=plan.notes)
    return plan.to_dict()


class _Selected:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics

    def selects(self, topic: str) -> bool:
        return topic in self.topics


def create_topics(topology: Topology, plan: OnboardPlan) -> dict[str, Any]:
    if plan.dry_run:
        return {"dry_run": True, "would_create": sorted(plan.topics)}
    clients = plan_clients(topology, plan)
    shape = sync_topic_shapes(clients[plan.sibling_of], clients[plan.cluster], _Selected(plan.topics),
                              align_configs=True)
    if shape.blocked:
        raise AirflowFailException("creating topics on " + plan.cluster + " failed:\n  " + "\n  ".join(
            f"{t}: {e}" for t, e in sorted(shape.blocked.items())))
    created = sorted(c.topic for c in shape.created)
    if OFFSETS_TOPIC in plan.topics and ensure_topic(clients[plan.cluster]):
        created.append(OFFSETS_TOPIC)
    log.info("created on %s: %s", plan.cluster, ", ".join(created) or "nothing (all there)")
    return {"created": created}


def sync_schemas(topology: Topology, plan: OnboardPlan, wanted: bool) -> dict[str, Any]:
    if not wanted or not topology.schemas.enabled:
        why = "the form turned it off" if not wanted else "the topology has no schemas.primary"
        log.info("schemas: nothing to do (%s)", why)
        return {"skipped": why}
    if plan.dry_run:
        return {"dry_run": True}
    from mirrorflow_airflow.factories.schemas import sync_target

    return sync_target(joined(topology, plan), plan.cluster, dry_run=False)


def position_groups(topology: Topology, plan: OnboardPlan) -> dict[str, Any]:
    if plan.dry_run:
        return {"dry_run": True}
    grown = joined(topology, plan)
    client = plan_clients(topology, plan)[plan.cluster]
    owners = group_owners()
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
    if plan.dry_run:
        return {"dry_run": True, "pins": plan.pins}
    targets = link_targets()
    pinned = {k: v for k, v in plan.pins.items() if targets.get(k) != v}
    if pinned:  # preflight computed them from the valid targets; a stale stored one is replaced
        set_link_targets({**targets, **pinned})
    events = record_change({**plan.event(), "at": datetime.now(timezone.utc).isoformat(), "run_id": run_id})
    grown = joined(topology, plan)
    log.info("%s joined the tree next to %s at level %d; its links: %s", plan.cluster, plan.sibling_of, plan.level,
             ", ".join(str(d) for d in grown.distributors(plan.cluster)))
    log.info("the link %s -> %s continues from the backfill's checkpoint at the next mirror_level_%d run",
             plan.sibling_of, plan.cluster, plan.level)
    audit("onboard_join", run_id=run_id, cluster=plan.cluster, sibling_of=plan.sibling_of, level=plan.level,
          pins=pinned, changes=len(events))
    return {"joined": True, "pins": pinned, "levels": grown.levels}


def verify_step(topology: Topology, plan: OnboardPlan) -> dict[str, Any]:
    if plan.dry_run:
        return {"dry_run": True}
    clients = plan_clients(topology, plan)
    data = {t: n for t, n in plan.topics.items() if t != OFFSETS_TOPIC}
    report = verify(clients[plan.sibling_of], clients[plan.cluster], data)
    out = {"ok": report.ok, **summarize(report.partitions), "problems": report.problems()}
    if not report.ok:
        raise AirflowFailException(f"{plan.cluster} does not match {plan.sibling_of}:\n  " +
                                   "\n  ".join(report.problems()))
    return out


def summary(plan_raw: dict | None, results: dict[str, Any], run_id: str) -> dict[str, Any]:
    missing = [s for s in STEPS if results.get(s) is None]
    out = {"cluster": (plan_raw or {}).get("cluster"), "steps": results, "ok": not missing}
    audit("onboard", run_id=run_id, **out, failed_steps=missing)
    if missing:
        raise AirflowFailException(f"onboarding did not complete: step(s) {', '.join(missing)} failed or did not "
                                   "run; re-run the DAG with the same form to continue")
    if plan_raw and not plan_raw.get("dry_run"):
        record_onboarding(plan_raw["cluster"], None)
    return out


# --------------------------------------------------------------------------- the DAG


def build_onboard_dag(topology: Topology) -> DAG:
    clusters = sorted(topology.clusters)
    with DAG(
        dag_id=DAG_ID,
        description="Add a cluster: topics, schemas, backfill, consumer positions, join the tree, verify",
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=tags("operations", "onboarding"),
        doc_md=__doc__,
        params={
            "cluster": Param("", type="string", title="New cluster name",
                             description="Letters, digits, _ and -; becomes a leaf of the tree"),
            "bootstrap": Param("", type=["null", "string"], title="Bootstrap address",
                               description="host:port[,host:port]; or leave empty and give a connection id"),
            "conn_id": Param("", type=["null", "string"], title="Airflow connection id",
                             description="A Kafka connection holding bootstrap.servers and credentials"),
            "sibling_of": Param(clusters[0], type="string", enum=clusters, title="Joins next to",
                                description="The existing cluster the new one pairs with; its peer for the backfill"),
            "level": Param(1, type="integer", minimum=1, maximum=63, title="At level",
                           description="The level of the new pair node; below the sibling's parent level"),
            "topics": Param([], type="array", items={"type": "string"}, title="Topics",
                            description="Names or regexes; empty: every mirrored topic"),
            "backfill": Param("retained", type="string", enum=list(BACKFILL_MODES), title="Backfill",
                              description="none: only new messages; retained: all the sibling holds; since: from "
                                          "a timestamp; archive: from the S3 archive, then Kafka"),
            "since": Param("", type=["null", "string"], title="Since (backfill 'since')",
                           description="ISO 8601 timestamp or epoch milliseconds"),
            "schemas": Param(True, type="boolean", title="Sync schemas"),
            "adopt": Param(False, type="boolean", title="Adopt existing topics",
                           description="Use topics that already exist on the new cluster (same partitions)"),
            "dry_run": Param(False, type="boolean", title="Dry run",
                             description="Run every check and show the plan; change nothing"),
        },
    ) as dag:

        @task
        def preflight_(params: dict | None = None, run_id: str | None = None) -> dict:
            """Every check before anything changes; the plan the other steps follow."""
            return run_preflight(topology, dict(params or {}), run_id or "")

        @task
        def create_topics_(plan: dict) -> dict:
            """Mirrored topics on the new cluster, shaped like the sibling's."""
            return create_topics(topology, _plan(plan))

        @task
        def schemas_(plan: dict, created: dict, params: dict | None = None) -> dict:
            """The primary registry's registrations, synced to the new cluster."""
            return sync_schemas(topology, _plan(plan), bool((params or {}).get("schemas", True)))

        @task
        def positions_(plan: dict, backfilled: dict) -> dict:
            """Consumer groups positioned on the new cluster."""
            return position_groups(topology, _plan(plan))

        @task
        def join_(plan: dict, positioned: dict, schemas: dict, run_id: str | None = None) -> dict:
            """The new cluster joins the tree; every DAG sees it from its next parse."""
            return join_tree(topology, _plan(plan), run_id or "")

        @task
        def verify_(plan: dict, joined_: dict) -> dict:
            """Counts and checksums by origin against the sibling."""
            return verify_step(topology, _plan(plan))

        @task(trigger_rule="all_done")
        def summary_(run_id: str | None = None, ti: Any = None) -> dict:
            """One audit line for the onboarding; fails if any step did."""
            results = {s: ti.xcom_pull(task_ids=s) for s in STEPS}
            return summary(results.get("preflight"), results, run_id or "")

        plan = preflight_.override(task_id="preflight")()
        created = create_topics_.override(task_id="create_topics")(plan)
        schemas = schemas_.override(task_id="schemas")(plan, created)
        backfill = MirrorBackfillOperator(task_id="backfill", topology=topology)
        created >> backfill
        positioned = positions_.override(task_id="positions")(plan, backfill.output)
        joined_ = join_.override(task_id="join")(plan, positioned, schemas)
        verify_.override(task_id="verify")(plan, joined_) >> summary_.override(task_id="summary")()
    return dag
