"""Resolve a topology cluster to client settings, reading Airflow connections when named.

A cluster given by ``conn_id`` uses an Airflow connection of the Kafka provider's
type: its extra JSON is the librdkafka config (``bootstrap.servers`` plus any
SASL/SSL settings). Secrets therefore stay in Airflow's connection store or in
``AIRFLOW_CONN_*`` environment variables, never in the topology file.

:func:`reachable_clients` gives every cluster of the topology as a client, the
unreachable ones set aside (named, with why): DAGs that visit every cluster
(offsets, failover, schemas) must keep going when one cluster is down, and say
which one; this is the one place that decides.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from airflow.sdk import BaseHook

from mirrorflow.errors import ClusterUnreachable, MirrorflowError
from mirrorflow.kafka import ClusterClient, probe
from mirrorflow.topology import Topology
from mirrorflow_airflow.hooks.masking import mask_settings

log = logging.getLogger(__name__)


class MirrorClusterHook(BaseHook):
    """One cluster of the topology, ready to hand to the core's Kafka layer."""

    conn_name_attr = "kafka_config_id"
    hook_name = "mirrorflow cluster"

    def __init__(self, topology: Topology, cluster: str) -> None:
        super().__init__()
        if cluster not in topology.clusters:
            raise MirrorflowError(f"cluster {cluster!r} is not in the topology (known: {sorted(topology.clusters)})")
        self.topology = topology
        self.cluster = cluster

    def client(self) -> ClusterClient:
        cfg = self.topology.clusters[self.cluster]
        connection = None
        if cfg.conn_id:
            conn = self.get_connection(cfg.conn_id)
            connection = dict(conn.extra_dejson)
            if "bootstrap.servers" not in connection and conn.host:
                port = f":{conn.port}" if conn.port else ""
                connection["bootstrap.servers"] = f"{conn.host}{port}"
            if "bootstrap.servers" not in connection:
                raise MirrorflowError(
                    f"clusters.{self.cluster}.conn_id: connection {cfg.conn_id!r} has no bootstrap.servers "
                    "in its extra and no host"
                )
            mask_settings(connection)
        return ClusterClient.from_cluster_config(self.cluster, cfg, connection, namespace=self.topology.namespace)

    def get_conn(self) -> ClusterClient:  # BaseHook's interface
        return self.client()


def reachable_clients(topology: Topology, names: Iterable[str] | None = None, timeout: float = 10.0
                      ) -> tuple[dict[str, ClusterClient], dict[str, str]]:
    """(clients that answered a probe, cluster -> reason for the others)."""
    ok: dict[str, ClusterClient] = {}
    down: dict[str, str] = {}
    for name in sorted(names if names is not None else topology.clusters):
        try:
            client = MirrorClusterHook(topology, name).client()
            probe(client, timeout=timeout)
            ok[name] = client
        except ClusterUnreachable as exc:
            down[name] = exc.detail
            log.error("cluster %s (%s) is unreachable: %s", name, exc.bootstrap, exc.detail)
        except MirrorflowError as exc:
            down[name] = str(exc)
            log.error("cluster %s: %s", name, exc)
    return ok, down
