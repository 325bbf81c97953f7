"""``mirror_failover_consumer_group``: move consumer groups from one cluster to another (manual, with a form).

Tasks, each with its own log:

1. ``preflight``: checks the request against the topology and the clusters,
   resolves the group patterns, and refuses (changing nothing) when a group has
   members on the target, or on the source in planned mode unless ``force``.
2. ``publish_final`` (planned): the source is checked again (no members, the
   commits the plan was made of; refused by name otherwise), then the groups'
   final positions are published on the source and carried along the tree to
   every cluster.
3. ``wait_for_replication`` (planned): a deferrable sensor that waits until the
   target holds every message the groups consumed on the source.
4. ``switch``: resolves each position on the target (``exact`` or ``timestamp``),
   logs the per-partition table (source position, target position, expected
   replay), checks the source again as ``publish_final`` did, and commits; the groups' owner becomes the target, so
   ``mirror_offsets`` follows the groups there from its next run.
5. ``verify``: re-reads the target's committed offsets against the table.
With ``approvals`` on in the topology, ``propose`` (the switch's table as a dry
run: per group, what it would read again and skip) and ``approve`` (Airflow's
human-in-the-loop, Browse > Required Actions) come first: nothing is published
or committed until someone approves; a rejection or no answer skips the rest.

6. ``read_only_guard``: where the target is a read-only cluster (``acl_sync.read_only``),
   the groups' topics there are opened to writers (the applications move with
   them); where the source is one, they are closed again. Otherwise it says so
   and does nothing.

Emergency mode (the source is gone) skips 2 and 3 and uses the last positions
that reached the target; the table says how old they are: whatever the group
consumed on the source after that is read again. Failback is the same DAG with
the clusters swapped. A dry run computes the same table and changes nothing.

The groups' consumers must read with ``isolation.level=read_committed`` on the
target (Kafka's Java consumer defaults to ``read_uncommitted``): copies of a
failed or killed level run stay in the log as aborted records, and a
``read_uncommitted`` consumer reads them, then the same messages again when the
next run copies them (docs/exactly-once.md).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, Param, task

from mirrorflow.offsets.failover import MODES
from mirrorflow.topology import Topology, in_tree
from mirrorflow.topology.offsets import PRECISIONS
from mirrorflow_airflow.factories.dag_header import OPERATIONS_POOL, mirror_dag
from mirrorflow_airflow.operators.approval import PlanApprovalOperator, responder
from mirrorflow_airflow.sensors.failover import GroupReplicatedSensor
from mirrorflow_airflow.steps.failover import (
    preflight,
    propose,
    publish_final,
    read_only_guard,
    refusal_is_final,
    switch,
    verify_switch,
)

DAG_ID = "mirror_failover_consumer_group"


def build_failover_dag(topology: Topology) -> DAG:
    approvals = topology.approvals
    clusters = sorted(topology.clusters)
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description="Move consumer groups to another cluster without skipping a message",
        schedule=None,
        retries=1,
        tags=("operations", "offsets"),
        doc_md=__doc__,
        params={
            "groups": Param([], type="array", items={"type": "string"}, title="Consumer groups",
                            description="Group names or regexes (full match), one per line"),
            "from_cluster": Param(clusters[0], type="string", enum=clusters, title="From cluster"),
            "to_cluster": Param(clusters[-1], type="string", enum=clusters, title="To cluster"),
            "mode": Param("planned", type="string", enum=list(MODES), title="Mode",
                          description="planned: the source is up and the groups stopped there; "
                                      "emergency: the source is gone, use the positions already distributed"),
            "precision": Param(topology.offsets.default_precision, type="string", enum=list(PRECISIONS),
                               title="Precision",
                               description="exact: proven cut from provenance; timestamp: last consumed "
                                           "CreateTime minus the margin"),
            "dry_run": Param(False, type="boolean", title="Dry run", description="Show the table, change nothing"),
            "force": Param(False, type="boolean", title="Force",
                           description="Planned mode: go ahead although groups still have members on the source"),
        },
    ) as dag:

        @task
        def preflight_(params: dict | None = None) -> dict:
            """The request checked: groups resolved, refusals with the reason (a refusal is not retried)."""
            with refusal_is_final():
                return preflight(topology, dict(params or {}))

        @task
        def publish_final_(plan: dict) -> dict:
            """Planned: the source checked again, then the final positions published and carried to every cluster."""
            with refusal_is_final():
                return publish_final(topology, plan)

        @task(pool=in_tree(topology.namespace, OPERATIONS_POOL))
        def switch_(plan: dict, published: dict, ti: Any = None) -> dict:
            """The per-partition table, and the commit on the target (a retry recomputes it: idempotent)."""
            approved_by = responder(ti.xcom_pull(task_ids="approve")) if approvals.enabled else None
            with refusal_is_final():
                return switch(topology, plan, approved_by)

        @task
        def verify_(summary: dict) -> dict:
            """The target's committed offsets re-read against the table."""
            return verify_switch(topology, summary)

        @task
        def read_only_guard_(summary: dict) -> dict:
            """A read-only cluster's guard follows the groups: lifted for their topics where they arrive."""
            return read_only_guard(topology, summary)

        plan = preflight_.override(task_id="preflight")()
        published = publish_final_.override(task_id="publish_final")(plan)
        if approvals.enabled:  # the plan shown and approved before anything is published or committed

            @task
            def propose_(plan: dict) -> dict:
                """The switch's table as a dry run, for the approver: per group, what it would replay and skip."""
                with refusal_is_final():
                    return propose(topology, plan)

            approve = PlanApprovalOperator(task_id="approve", settings=approvals, action="failover",
                                           plan_task_id="propose")
            propose_.override(task_id="propose")(plan) >> approve >> published
        wait = GroupReplicatedSensor(task_id="wait_for_replication", plan=plan, poke_interval=15, timeout=1800,
                                     tree=topology.namespace)
        summary = switch_.override(task_id="switch")(plan, published)
        published >> wait >> summary
        verified = verify_.override(task_id="verify")(summary)
        verified >> read_only_guard_.override(task_id="read_only_guard")(summary)
    return dag
