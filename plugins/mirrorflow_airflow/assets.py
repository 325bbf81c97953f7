"""mirrorflow's Airflow assets: what level runs, backfills and restores bring to each cluster, and the windows
the completeness audit proves complete there (docs/assets.md).

For users' DAGs, two functions name them::

    from mirrorflow_airflow.assets import arrived, proven

    schedule=[arrived("c3", "orders")]                                       # new records of orders on c3
    schedule=PartitionedAssetTimetable(assets=proven("c3", "orders"))        # one run per proven window

The URIs and the events' contents are the core's (:mod:`mirrorflow.assets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Asset, AssetAlias

from mirrorflow.assets import Arrival, arrival_uri, proven_uri
from mirrorflow.topology import Topology

#: Every arrival is emitted through this alias: which clusters and topics a run reaches is known only then.
ARRIVALS = AssetAlias(name="mirrorflow.arrivals")


def arrival_asset(bootstrap_servers: str, topic: str) -> Asset:
    """``topic`` on the cluster at ``bootstrap_servers`` (the Kafka provider's ``kafka://host:port/topic``)."""
    return Asset(uri=arrival_uri(bootstrap_servers, topic))


def proven_asset(cluster: str, topic: str) -> Asset:
    """The windows of ``topic`` the audit proves complete on ``cluster`` (partition key: the window's start)."""
    return Asset(name=f"mirrorflow.proven.{cluster}.{topic}", uri=proven_uri(cluster, topic), group="mirrorflow")


def _bootstrap(topology: Topology, cluster: str) -> str:
    config = topology.cluster(cluster)
    if config.bootstrap:
        return str(config.bootstrap)
    from airflow.sdk import BaseHook  # the connection's address only; its secrets are not read here

    conn = BaseHook.get_connection(str(config.conn_id))
    servers = conn.extra_dejson.get("bootstrap.servers") or (f"{conn.host}:{conn.port}" if conn.port else conn.host)
    if not servers:
        raise ValueError(f"clusters.{cluster}.conn_id: connection {config.conn_id!r} names no bootstrap.servers")
    return str(servers)


def arrived(cluster: str, topic: str, topology: Topology | None = None) -> Asset:
    """For a user's DAG: the asset of ``topic`` on ``cluster`` of the topology (default: the one the DAGs load)."""
    if topology is None:
        from mirrorflow_airflow.topology import current_topology

        topology = current_topology()
    return arrival_asset(_bootstrap(topology, cluster), topic)


def proven(cluster: str, topic: str) -> Asset:
    """For a user's DAG: the windows of ``topic`` proven complete on ``cluster``."""
    return proven_asset(cluster, topic)


def emit_arrivals(outlet_events: Any, found: Iterable[Arrival]) -> list[str]:
    """Add one event per arrival to the task's ``outlet_events`` (through :data:`ARRIVALS`); their URIs."""
    emitted = []
    for arrival in found:
        outlet_events[ARRIVALS].add(Asset(uri=arrival.uri), extra=dict(arrival.extra))
        emitted.append(arrival.uri)
    return emitted


def emit_proven(outlet_events: Any, windows: Iterable[Mapping[str, Any]], run_id: str) -> dict[str, list[str]]:
    """Add one partitioned event per proven window (``AuditResult.summary()['proven']``); asset URI -> keys."""
    keys: dict[str, list[str]] = {}
    for window in windows:
        asset = proven_asset(window["cluster"], window["topic"])
        accessor = outlet_events[asset]
        accessor.add_partitions(window["window"])
        # one extra for every window of the asset in this run: each window's messages from other clusters
        accessor.extra = {"audit_run": run_id,
                          "messages": {**accessor.extra.get("messages", {}), window["window"]: window["messages"]}}
        keys.setdefault(asset.uri, []).append(window["window"])
    return keys
