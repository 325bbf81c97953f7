"""``mirror_schemas``: the primary registry's registrations on every other cluster (default every minute).

One task per target cluster, ``sync_<cluster>``, so each target has its own
log (its audit record: one ``schema_write`` line per record written) and its
own retries. Each task reads the primary, translates subjects into the
target's format, writes what the target lacks (ids and versions kept) and
fails if anything was left out:

* a conflict (the target holds a different schema under the same id, or under
  the same subject and version) stops that subject only; the task fails at the
  end, without retries, listing cluster, subject, version and id;
* an unreachable cluster or registry fails the task, which is retried.

Trigger with ``{"dry_run": true}`` to see what would be written. Without a
``schemas`` section in the topology the DAG has one task that says so.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, task

from mirrorflow.topology import Topology, in_tree
from mirrorflow.topology.replication import parse_schedule
from mirrorflow_airflow.factories.dag_header import mirror_dag
from mirrorflow_airflow.steps.schemas import report_disabled, sync_target

DAG_ID = "mirror_schemas"


def build_schemas_dag(topology: Topology) -> DAG:
    config = topology.schemas
    with mirror_dag(
        in_tree(topology.namespace, DAG_ID),
        description="Copy the primary schema registry's registrations to every other cluster, subjects translated",
        schedule=parse_schedule(config.schedule),
        tags=("schemas",),
        doc_md=__doc__,
        params={"dry_run": Param(False, type="boolean", title="Dry run",
                                 description="Log what would be written, write nothing")},
    ) as dag:
        if not config.enabled:

            @task
            def disabled() -> str:
                """Nothing to sync: the topology names no schemas.primary."""
                return report_disabled()

            disabled()
            return dag

        for target in (c for c in topology.clusters if c != config.primary):

            @task(task_id=f"sync_{target}")
            def sync_one(cluster: str = target, params: dict | None = None) -> dict:
                """The primary's registrations on this cluster's registry."""
                return sync_target(topology, cluster, bool((params or {}).get("dry_run")))

            sync_one()
    return dag
