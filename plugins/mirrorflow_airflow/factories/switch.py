"""``mirror_switch_target``: move one link to another leaf of its sibling subtree (manual, with a form).

The Axual operator action for a target leaf that is unavailable or being
decommissioned. The form offers the topology's clusters and levels as
drop-downs; the task checks the choice against the tree, cuts the link over
exactly (see :mod:`mirrorflow.actions.switch`), and records the new effective
target in the Airflow Variable the level DAGs read at every run: no file edit,
no restart. A dry run shows the cut without changing anything. With
``approvals`` on, ``propose`` computes the cut as a dry run and ``approve`` waits
for someone to approve it (Browse > Required Actions) before the link moves;
``switch`` then refuses by name if the link changed meanwhile (another target, or
an exact cut that could now only come from provenance).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, task

from mirrorflow.topology import Topology, in_tree
from mirrorflow_airflow.factories.dag_header import OPERATIONS_POOL, mirror_dag
from mirrorflow_airflow.operators.approval import PlanApprovalOperator, responder
from mirrorflow_airflow.steps.switch import propose_switch, run_switch

DAG_ID = "mirror_switch_target"


def build_switch_dag(topology: Topology) -> DAG:
    approvals = topology.approvals
    clusters = sorted(topology.clusters)
    levels = topology.levels
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description="Switch a link's target to another leaf of the same subtree (no gap, no duplicate)",
        schedule=None,
        retries=1,
        tags=("operations",),
        doc_md=__doc__,
        params={
            "source_cluster": Param(clusters[0], type="string", enum=clusters, title="Source cluster",
                                    description="The cluster whose distributor is switched"),
            "level": Param(levels[-1], type="integer", enum=levels, title="Level",
                           description="The distributor's level"),
            "target": Param(clusters[-1], type="string", enum=clusters, title="New target",
                            description="A leaf of the level's sibling subtree of the source"),
            "dry_run": Param(False, type="boolean", title="Dry run", description="Show the cut, change nothing"),
            "force": Param(False, type="boolean", title="Force",
                           description="Switch even if the current target is unreachable (cut from provenance)"),
        },
    ) as dag:

        @task(pool=in_tree(topology.namespace, OPERATIONS_POOL))
        def switch(params: dict | None = None, ti: Any = None) -> dict:
            """Cut the link over to the new target and record it."""
            p = params or {}
            approved_by = responder(ti.xcom_pull(task_ids="approve")) if approvals.enabled else None
            # what the approver saw, checked again before the link moves
            approved = (ti.xcom_pull(task_ids="propose") or {}).get("report") if approvals.enabled else None
            return run_switch(topology, p["source_cluster"], int(p["level"]), p["target"],
                              dry_run=bool(p.get("dry_run")), force=bool(p.get("force")), approved_by=approved_by,
                              approved=approved)

        switched = switch()
        if approvals.enabled:  # the cut shown and approved before the link moves

            @task
            def propose(params: dict | None = None) -> dict:
                """The cut as a dry run computes it, for the approver."""
                p = params or {}
                return propose_switch(topology, p["source_cluster"], int(p["level"]), p["target"],
                                      force=bool(p.get("force")))

            propose() >> PlanApprovalOperator(task_id="approve", settings=approvals, action="switch_target",
                                              plan_task_id="propose") >> switched
    return dag
