"""Resolve a cluster's schema registry (``schemas.clusters.<c>`` with ``via: rest``) to client settings.

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
"""

from __future__ import annotations

from typing import Any, cast

from airflow.sdk import BaseHook

from mirrorflow.errors import MirrorflowError
from mirrorflow.schemas.rest_store import inline_pem_to_files
from mirrorflow.topology import Topology
from mirrorflow_airflow.hooks.masking import mask_settings


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
