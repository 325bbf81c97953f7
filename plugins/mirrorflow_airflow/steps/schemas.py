"""The step of ``mirror_schemas``: one target cluster's registry synced from the primary.

One step per target keeps each target's log and retries its own. A conflict
is final (a retry would meet it again) and is raised only after every other
subject was written; an unreachable cluster or registry is retried.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from mirrorflow.audit import audit
from mirrorflow.schemas.rest_store import RegistryAccessError
from mirrorflow.schemas.sync import build_store, sync
from mirrorflow.topology import Topology
from mirrorflow_airflow.clusters import reachable_clients
from mirrorflow_airflow.hooks.registry import SchemaRegistryHook

log = logging.getLogger(__name__)


def _store(topology: Topology, cluster: str, clients: dict[str, Any]):
    """One cluster's registry, reached through REST or its storage topic as the topology says."""
    registry = topology.schemas.registry(cluster)
    return build_store(cluster, registry, clients.get(cluster), SchemaRegistryHook(topology, cluster).conf())


def sync_target(topology: Topology, target: str, dry_run: bool) -> dict[str, Any]:
    """Sync one target from the primary; raises (retryable or final) when something was left out."""
    primary = cast(str, topology.schemas.primary)  # only called when the topology names one (schemas.enabled)
    by_topic = [c for c in (primary, target) if topology.schemas.registry(c).via == "topic"]
    clients, down = reachable_clients(topology, by_topic)
    if down:
        raise AirflowException("; ".join(f"cluster {c} is unreachable: {why}" for c, why in sorted(down.items())))
    source = _store(topology, primary, clients)
    store = _store(topology, target, clients)
    log.info("syncing %s -> %s%s", source.describe(), store.describe(), " (dry run)" if dry_run else "")
    try:
        result = sync(source, topology.schemas.registry(primary).subject_naming(),
                      [(store, topology.schemas.registry(target).subject_naming())], dry_run=dry_run)
    except RegistryAccessError as exc:  # the primary refused the login or is not trusted: retries would too
        raise AirflowFailException(str(exc)) from None
    [outcome] = result.targets
    audit("schemas_run", primary=primary, cluster=target, via=store.via, dry_run=dry_run,
          subjects=outcome.subjects, planned=outcome.planned, written=len(outcome.written),
          conflicts=[c.to_dict() for c in outcome.conflicts], unparsable=result.unparsable, error=outcome.error)
    if outcome.error:
        raise (AirflowFailException if outcome.final else AirflowException)(outcome.error)
    if outcome.conflicts:
        raise AirflowFailException(
            f"{len(outcome.conflicts)} subject(s) not synced to {target} (the others were):\n  "
            + "\n  ".join(str(c) for c in outcome.conflicts))
    return result.to_dict()


def report_disabled() -> str:
    """Say why nothing is synced, so a DAG without work still shows a reason in its log."""
    log.info("the topology has no schemas.primary: there is no registry to sync from")
    return "disabled"
