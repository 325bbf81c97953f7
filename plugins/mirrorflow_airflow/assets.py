"""mirrorflow's Airflow assets: what level runs, backfills and restores bring to each cluster, and the windows
the completeness audit proves complete there (docs/assets.md).

For users' DAGs, two functions name them::

    from mirrorflow_airflow.assets import arrived, proven

    schedule=[arrived("c3", "orders")]                                       # new records of orders on c3
    schedule=PartitionedAssetTimetable(assets=proven("c3", "orders"))        # one run per proven window

The URIs and the events' contents are the core's (:mod:`mirrorflow.assets`).

A new arrival asset is announced by a task of its own, ``announce``, one at a time in the
pool :data:`ANNOUNCE_POOL`: Airflow 3.3 creates an asset the first time a task emits it, and
when two tasks emit the same new asset at once, its API server fails one of them on a UNIQUE
constraint and marks that task failed, although its copy succeeded (docs/assets.md, "New assets").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Asset, AssetAlias
from airflow.sdk.exceptions import DownstreamTasksSkipped

from mirrorflow.assets import Arrival, arrival_uri, proven_uri
from mirrorflow.topology import Topology, in_tree

log = logging.getLogger(__name__)

#: Every arrival is emitted through this alias: which clusters and topics a run reaches is known only then.
ARRIVALS = AssetAlias(name="mirrorflow.arrivals")

#: The pool (one slot, deploy/pools.json) of the ``announce`` tasks, which emit arrivals Airflow has no asset for yet.
ANNOUNCE_POOL = "mirrorflow_assets"

#: The task id of the task that announces what its upstream held back (:func:`finish_with_arrivals`).
ANNOUNCE_TASK = "announce"


def arrival_asset(bootstrap_servers: str, topic: str) -> Asset:
    """``topic`` on the cluster at ``bootstrap_servers`` (the Kafka provider's ``kafka://host:port/topic``)."""
    return Asset(uri=arrival_uri(bootstrap_servers, topic))


def proven_asset(cluster: str, topic: str, ns: str = "") -> Asset:
    """The windows of ``topic`` the audit proves complete on ``cluster`` (partition key: the window's start).

    ``ns``: the tree's namespace; one of several trees in one Airflow names the cluster ``<ns>.<cluster>``.
    """
    where = in_tree(ns, cluster)
    return Asset(name=f"mirrorflow.proven.{where}.{topic}", uri=proven_uri(where, topic), group="mirrorflow")


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


def arrived(cluster: str, topic: str, topology: Topology | None = None, tree: str = "") -> Asset:
    """For a user's DAG: the asset of ``topic`` (its logical name) on ``cluster`` of the topology (default: the one
    the DAGs load, tree ``tree`` of several), named as the cluster names it."""
    if topology is None:
        from mirrorflow_airflow.topology import current_topology

        topology = current_topology(ns=tree)
    return arrival_asset(_bootstrap(topology, cluster), topology.topic_naming(cluster).render(topic))


def proven(cluster: str, topic: str, tree: str = "") -> Asset:
    """For a user's DAG: the windows of ``topic`` proven complete on ``cluster`` (of tree ``tree``, of several)."""
    return proven_asset(cluster, topic, tree)


def known_arrivals() -> frozenset[str]:
    """The URIs Airflow already has an asset for through :data:`ARRIVALS`; empty when it cannot say.

    Asked of the task's supervisor as Airflow's own alias inlets are (the Task SDK has no public call
    for it). Empty is the safe answer: every arrival is then announced, one task at a time.
    """
    try:
        from airflow.sdk.execution_time.comms import AssetsByAliasResult, GetAssetsByAlias
        from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

        answer = SUPERVISOR_COMMS.send(GetAssetsByAlias(alias_name=ARRIVALS.name))
    except Exception as exc:  # an older or newer Task SDK: announce everything, which is always right
        log.warning("which arrival assets Airflow knows could not be asked (%s: %s); all are announced by %r",
                    type(exc).__name__, exc, ANNOUNCE_TASK)
        return frozenset()
    if not isinstance(answer, AssetsByAliasResult):
        return frozenset()
    return frozenset(asset.uri for asset in answer.assets)


def emit_arrivals(outlet_events: Any, found: Iterable[Arrival],
                  known: frozenset[str] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """Emit the arrivals whose asset Airflow has; hold back the others for ``announce``.

    Returns the URIs of every arrival, and the held ones as ``{"uri", "extra"}`` (JSON, for XCom).
    ``known`` defaults to :func:`known_arrivals`.
    """
    found = list(found)
    if known is None:
        known = known_arrivals() if found else frozenset()
    events: list[dict[str, Any]] = [{"uri": arrival.uri, "extra": dict(arrival.extra)} for arrival in found]
    announce(outlet_events, [e for e in events if e["uri"] in known])
    return [e["uri"] for e in events], [e for e in events if e["uri"] not in known]


def finish_with_arrivals(context: Any, result: dict[str, Any], held: list[dict[str, Any]]) -> dict[str, Any]:
    """The task's return value: ``result`` with ``held`` under ``"announce"`` for the next task, ``announce``.

    With nothing held, ``announce`` is skipped from here, so no task process starts for it (the skip ends the
    task before Airflow pushes its return value, so that is pushed first). A task wired without ``announce``
    emits what it held itself.
    """
    has_announce = ANNOUNCE_TASK in context["task"].get_direct_relative_ids(upstream=False)
    if held and not has_announce:
        announce(context["outlet_events"], held)
        held = []
    result["announce"] = held
    if held:
        log.info("%d new arrival asset(s), announced by the next task, %r: %s", len(held), ANNOUNCE_TASK,
                 ", ".join(h["uri"] for h in held))
    elif has_announce:
        context["ti"].xcom_push(key="return_value", value=result)
        raise DownstreamTasksSkipped(tasks=[ANNOUNCE_TASK])
    return result


def announce(outlet_events: Any, held: Iterable[Mapping[str, Any]]) -> list[str]:
    """Emit the arrivals an upstream task held back (:func:`emit_arrivals`); their URIs."""
    uris = []
    for arrival in held:
        outlet_events[ARRIVALS].add(Asset(uri=arrival["uri"]), extra=dict(arrival["extra"]))
        uris.append(arrival["uri"])
    return uris


def emit_proven(outlet_events: Any, windows: Iterable[Mapping[str, Any]], run_id: str, ns: str = ""
                ) -> dict[str, list[str]]:
    """Add one partitioned event per proven window (``AuditResult.summary()['proven']``); asset URI -> keys."""
    keys: dict[str, list[str]] = {}
    for window in windows:
        asset = proven_asset(window["cluster"], window["topic"], ns)
        accessor = outlet_events[asset]
        accessor.add_partitions(window["window"])
        # one extra for every window of the asset in this run: each window's messages from other clusters
        accessor.extra = {"audit_run": run_id,
                          "messages": {**accessor.extra.get("messages", {}), window["window"]: window["messages"]}}
        keys.setdefault(asset.uri, []).append(window["window"])
    return keys
