"""``mirror_decommission_cluster``: take a cluster out of the tree (manual, with a form); no file edit.

Steps, each its own task and log:

1. ``preflight``: the cluster can leave (not the schema primary, link ids
   survive), and no consumer group is active on it (unless ``force``). The
   plan: which links move where, which of its own links drain.
2. ``switch``: every link that copies into the cluster moves to another leaf
   of the same subtree with an exact cut (:mod:`mirrorflow.actions.switch`); the
   new targets are recorded at once, so level runs use them from now on.
3. ``drain``: the cluster's own links copy what it still holds (in this task,
   up to the end captured now); refuses to go on while producers keep writing
   to it (unless ``force``).
4. ``leave``: the cluster leaves the tree (Airflow Variable
   ``mirrorflow_topology_changes``); every DAG drops its links at its next parse.
5. ``summary``: one journal line.

With ``approvals`` on, ``propose`` (the moves with their cuts, as a dry run) and
``approve`` (Browse > Required Actions) come between 1 and 2: no link moves until
someone approves; a rejection or no answer skips every later step, summary included.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, task

from mirrorflow.topology import Topology, in_tree
from mirrorflow_airflow.factories.dag_header import OPERATIONS_POOL, mirror_dag
from mirrorflow_airflow.operators.approval import PlanApprovalOperator, responder
from mirrorflow_airflow.steps.decommission import (
    STEPS,
    drain,
    leave,
    propose,
    run_preflight,
    summary,
    switch_links,
)

DAG_ID = "mirror_decommission_cluster"


def build_decommission_dag(topology: Topology) -> DAG:
    approvals = topology.approvals
    clusters = sorted(topology.clusters)
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description="Take a cluster out of the tree: move links into it, drain it, leave (no loss)",
        schedule=None,
        tags=("operations",),
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

        @task(pool=in_tree(topology.namespace, OPERATIONS_POOL))
        def switch_(plan: dict) -> dict:
            """Links into the cluster move to a sibling leaf, with exact cuts."""
            return switch_links(topology, plan)

        @task
        def drain_(plan: dict, switched: dict, run_id: str | None = None) -> dict:
            """The cluster's own links pass on what it still holds."""
            return drain(topology, plan, run_id or "")

        @task(pool=in_tree(topology.namespace, OPERATIONS_POOL))
        def leave_(plan: dict, drained: dict, run_id: str | None = None) -> dict:
            """The cluster leaves the tree; every DAG sees it from its next parse."""
            return leave(topology, plan, run_id or "")

        @task(trigger_rule="all_done")
        def summary_(run_id: str | None = None, ti: Any = None) -> dict:
            """One journal line; fails if a step did."""
            approved_by = responder(ti.xcom_pull(task_ids="approve")) if approvals.enabled else None
            return summary({s: ti.xcom_pull(task_ids=s) for s in STEPS}, run_id or "", approved_by)

        plan = preflight_.override(task_id="preflight")()
        switched = switch_.override(task_id="switch")(plan)
        if approvals.enabled:  # the moves and their cuts shown and approved before any link moves

            @task
            def propose_(plan: dict) -> dict:
                """The moves with their cuts (a dry run) and what drains, for the approver."""
                return propose(topology, plan)

            propose_.override(task_id="propose")(plan) >> PlanApprovalOperator(
                task_id="approve", settings=approvals, action="decommission", plan_task_id="propose") >> switched
        drained = drain_.override(task_id="drain")(plan, switched)
        leave_.override(task_id="leave")(plan, drained) >> summary_.override(task_id="summary")()
    return dag
