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

import logging
from typing import Any

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from mirrorflow.audit import audit
from mirrorflow.schemas.sync import build_store, sync
from mirrorflow.topology import Topology
from mirrorflow.topology.replication import parse_schedule
from mirrorflow_airflow.clusters import reachable_clients
from mirrorflow_airflow.defaults import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.hooks.registry import SchemaRegistryHook

log = logging.getLogger(__name__)

DAG_ID = "mirror_schemas"


def _store(topology: Topology, cluster: str, clients: dict[str, Any]):
    registry = topology.schemas.registry(cluster)
    return build_store(cluster, registry, clients.get(cluster), SchemaRegistryHook(topology, cluster).conf())


def sync_target(topology: Topology, target: str, dry_run: bool) -> dict[str, Any]:
    """Sync one target from the primary; raises (retryable or final) when something was left out."""
    primary = topology.schemas.primary
    by_topic = [c for c in (primary, target) if topology.schemas.registry(c).via == "topic"]
    clients, down = reachable_clients(topology, by_topic)
    if down:
        raise AirflowException("; ".join(f"cluster {c} is unreachable: {why}" for c, why in sorted(down.items())))
    source = _store(topology, primary, clients)
    store = _store(topology, target, clients)
    log.info("syncing %s -> %s%s", source.describe(), store.describe(), " (dry run)" if dry_run else "")
    result = sync(source, topology.schemas.registry(primary).subject_naming(),
                  [(store, topology.schemas.registry(target).subject_naming())], dry_run=dry_run)
    [outcome] = result.targets
    audit("schemas_run", primary=primary, cluster=target, via=store.via, dry_run=dry_run,
          subjects=outcome.subjects, planned=outcome.planned, written=len(outcome.written),
          conflicts=[c.to_dict() for c in outcome.conflicts], unparsable=result.unparsable, error=outcome.error)
    if outcome.error:
        raise AirflowException(outcome.error)
    if outcome.conflicts:
        raise AirflowFailException(
            f"{len(outcome.conflicts)} subject(s) not synced to {target} (the others were):\n  "
            + "\n  ".join(str(c) for c in outcome.conflicts))
    return result.to_dict()


def build_schemas_dag(topology: Topology) -> DAG:
    config = topology.schemas
    with DAG(
        dag_id=DAG_ID,
        description="Copy the primary schema registry's registrations to every other cluster, subjects translated",
        schedule=parse_schedule(config.schedule),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=tags("schemas"),
        doc_md=__doc__,
        params={"dry_run": Param(False, type="boolean", title="Dry run",
                                 description="Log what would be written, write nothing")},
    ) as dag:
        if not config.enabled:

            @task
            def disabled() -> str:
                """Nothing to sync: the topology names no schemas.primary."""
                log.info("the topology has no schemas.primary: there is no registry to sync from")
                return "disabled"

            disabled()
            return dag

        for target in (c for c in topology.clusters if c != config.primary):

            @task(task_id=f"sync_{target}")
            def sync_one(cluster: str = target, params: dict | None = None) -> dict:
                """The primary's registrations on this cluster's registry."""
                return sync_target(topology, cluster, bool((params or {}).get("dry_run")))

            sync_one()
    return dag
