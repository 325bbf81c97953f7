"""A cluster's schema registry: its client settings (``schemas.clusters.<c>`` with ``via: rest``), and its sync.

With ``conn_id`` the Airflow connection holds the registry: its host is the
URL (``https://registry.example:8081``, or host plus port and schema; the
extra's ``url`` wins when it also needs a path), its login and password become
basic auth (``basic.auth.user.info``), and its extra JSON may add any other
setting of confluent-kafka's schema registry client. The registry's CA is
``ssl.ca.location`` (a file every worker has) or ``ssl.ca.pem`` (the PEM text
itself, written here to a private temporary file, since the client opens only
files); a client certificate likewise (``ssl.certificate.location`` /
``ssl.key.location``, or ``ssl.certificate.pem`` / ``ssl.key.pem``).
Credentials therefore live in Airflow's connection store or in
``AIRFLOW_CONN_*`` environment variables, never in the topology file or logs:
every secret value is handed to Airflow's log masker.

:func:`sync_from_primary` syncs one target's registry from the primary's
through these settings (or through the registries' storage topics), as
``mirror_schemas`` does for every target and ``mirror_onboard_cluster`` for the
new cluster.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_entry
from mirrorflow.schemas.rest_store import RegistryAccessError, inline_pem_to_files
from mirrorflow.schemas.sync import build_store, sync
from mirrorflow.topology import Topology
from mirrorflow_airflow.hooks.cluster import reachable_clients
from mirrorflow_airflow.hooks.masking import mask_settings

log = logging.getLogger(__name__)


class SchemaRegistryHook(BaseHook):
    """One cluster's registry as a ``SchemaRegistryClient`` configuration."""

    conn_name_attr = "schema_registry_conn_id"
    hook_name = "mirrorflow schema registry"

    def __init__(self, topology: Topology, cluster: str) -> None:
        super().__init__()
        self.registry = topology.schemas.registry(cluster)
        self.cluster = cluster

    def conf(self) -> dict[str, Any] | None:
        """``None`` for a registry reached through its storage topic."""
        if self.registry.via != "rest":
            return None
        if self.registry.url:
            return {"url": self.registry.url}
        conn = self.get_connection(cast(str, self.registry.conn_id))  # the topology gives rest a url or a conn_id
        conf: dict[str, Any] = dict(conn.extra_dejson)
        host = conn.host or ""
        if host and "://" not in host:
            host = f"{conn.schema or 'http'}://{host}"
        if host and conn.port:
            host = f"{host}:{conn.port}"
        conf.setdefault("url", host)
        if not conf["url"]:
            raise MirrorflowError(f"schemas.clusters.{self.cluster}.conn_id: connection {self.registry.conn_id!r} "
                                  "has no host (the registry URL)")
        if conn.login:
            conf.setdefault("basic.auth.user.info", f"{conn.login}:{conn.password or ''}")
        mask_settings(conf)  # before the PEM becomes a path: ssl.key.pem is a secret
        try:
            return inline_pem_to_files(conf)
        except MirrorflowError as exc:
            raise MirrorflowError(f"schemas.clusters.{self.cluster}.conn_id: connection {self.registry.conn_id!r}: "
                                  f"{exc}") from None

    def get_conn(self) -> dict[str, Any] | None:  # BaseHook's interface
        return self.conf()


def _store(topology: Topology, cluster: str, clients: dict[str, Any]):
    """One cluster's registry, reached through REST or its storage topic as the topology says."""
    registry = topology.schemas.registry(cluster)
    return build_store(cluster, registry, clients.get(cluster), SchemaRegistryHook(topology, cluster).conf())


def sync_from_primary(topology: Topology, target: str, dry_run: bool) -> dict[str, Any]:
    """Sync one target from the primary; raises (retryable or final) when something was left out.

    A conflict is final (a retry would meet it again) and is raised only after
    every other subject was written; an unreachable cluster or registry is retried.
    """
    primary = cast(str, topology.schemas.primary)  # only called when the topology names one (schemas.enabled)
    by_topic = [c for c in (primary, target) if topology.schemas.registry(c).via == "topic"]
    clients, down = reachable_clients(topology, by_topic)
    if down:
        raise AirflowException("; ".join(f"cluster {c} is unreachable: {why}" for c, why in sorted(down.items())))
    source = _store(topology, primary, clients)
    store = _store(topology, target, clients)
    log.info("syncing %s -> %s%s", source.describe(), store.describe(), " (dry run)" if dry_run else "")
    try:
        result = sync(source, topology.subject_naming(primary), [(store, topology.subject_naming(target))],
                      dry_run=dry_run)
    except RegistryAccessError as exc:  # the primary refused the login or is not trusted: retries would too
        raise AirflowFailException(str(exc)) from None
    [outcome] = result.targets
    journal_entry("schemas_run", primary=primary, cluster=target, via=store.via, dry_run=dry_run,
                  subjects=outcome.subjects, planned=outcome.planned, written=len(outcome.written),
                  conflicts=[c.to_dict() for c in outcome.conflicts], unparsable=result.unparsable, error=outcome.error)
    if outcome.error:
        raise (AirflowFailException if outcome.final else AirflowException)(outcome.error)
    if outcome.conflicts:
        raise AirflowFailException(
            f"{len(outcome.conflicts)} subject(s) not synced to {target} (the others were):\n  "
            + "\n  ".join(str(c) for c in outcome.conflicts))
    return result.to_dict()
