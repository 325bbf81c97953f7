"""Cluster changes made by operators, applied on top of the topology file.

Onboarding and decommissioning change the tree without a file edit: the
change is recorded as an event (``add`` or ``remove``) in durable operator state
(Airflow keeps the list in its metadata database, see
``mirrorflow_airflow.state``), and every DAG applies the events to the file's
topology when it is parsed, so the change is visible to each DAG from its next
run. The file stays the base: an event the file has caught up with (the
cluster is already there, or already gone) is ignored with a log line, so an
operator may fold the changes into the file at leisure.

Events are plain JSON::

    {"op": "add", "cluster": "c4", "config": {"bootstrap": "..."} , "sibling_of": "c3", "level": 1}
    {"op": "remove", "cluster": "c2"}
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from mirrorflow.errors import MirrorflowError, TopologyError
from mirrorflow.topology.model import Topology

log = logging.getLogger(__name__)

#: Where the events come from, for error messages.
CHANGES_SOURCE = "cluster changes (Airflow Variable mirrorflow_topology_changes)"


def add_event(cluster: str, config: Mapping[str, Any], *, sibling_of: str, level: int, **extra: Any) -> dict[str, Any]:
    return {"op": "add", "cluster": cluster, "config": dict(config), "sibling_of": sibling_of, "level": level,
            **extra}


def remove_event(cluster: str, **extra: Any) -> dict[str, Any]:
    return {"op": "remove", "cluster": cluster, **extra}


def apply_changes(base: Topology, events: Iterable[Mapping[str, Any]]) -> Topology:
    """``base`` with each event applied in order; an event that no longer applies is skipped and logged.

    An event that cannot be applied (its sibling left the file, a level that no
    longer fits) raises :class:`TopologyError` naming the event, so a broken
    change shows up as an import error of every DAG instead of silently
    dropping a cluster from distribution.
    """
    topology = base
    for i, event in enumerate(events):
        where = f"{CHANGES_SOURCE}[{i}]"
        op, name = event.get("op"), event.get("cluster")
        if not isinstance(name, str) or op not in ("add", "remove"):
            raise TopologyError(where, f"not a cluster change: {dict(event)!r}")
        if op == "add":
            if name in topology.clusters:
                log.info("%s: cluster %s is already in the topology; the add is ignored", where, name)
                continue
            try:
                topology = topology.with_cluster(name, event["config"], sibling_of=event["sibling_of"],
                                                 level=int(event["level"]))
            except (KeyError, ValueError, MirrorflowError) as exc:
                raise TopologyError(where, f"adding cluster {name!r} no longer applies to the topology: {exc}") \
                    from None
        else:
            if name not in topology.clusters:
                log.info("%s: cluster %s is not in the topology; the removal is ignored", where, name)
                continue
            try:
                topology = topology.without_cluster(name)
            except MirrorflowError as exc:
                raise TopologyError(where, f"removing cluster {name!r} no longer applies: {exc}") from None
    return topology
