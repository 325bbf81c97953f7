"""The steps of ``mirror_lag_monitor``: measure and store one snapshot, then hold it to the SLA.

The snapshot is kept in an Airflow Variable as well as returned, so any task
(and an operator, under Admin -> Variables) can read the latest one without
measuring again (:func:`mirrorflow_airflow.state.read_lag_snapshot`). The check
is a step of its own: the snapshot is stored and logged even when it exceeds
the SLA, and the failure names every violation.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from mirrorflow import lag
from mirrorflow.completeness.run import summary_problems
from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_entry
from mirrorflow.offsets.failover_preview import preview_failovers
from mirrorflow.topology import Topology, effective_links
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.state import group_owners, link_targets, read_audit_result, read_lag_snapshot, set_lag_snapshot

log = logging.getLogger(__name__)

#: Rows per table in the task log (the snapshot itself has every row).
LOG_ROWS = 200


class LagSlaExceeded(AirflowFailException, MirrorflowError):
    """The lag SLA of the topology is exceeded. Not retried: a retry would read the same snapshot."""


def take_snapshot(topology: Topology, now: datetime | None = None) -> lag.LagSnapshot:
    """One measurement of every link (effective targets) and every selected group on every cluster."""
    targets = link_targets(topology.namespace)
    links = [l for level in topology.levels for l in effective_links(topology, level, targets)]
    clients, unavailable = {}, {}
    for name in sorted(topology.clusters):
        try:
            clients[name] = MirrorClusterHook(topology, name).client()
        except Exception as exc:  # a missing connection must not hide the other clusters
            unavailable[name] = f"has no client settings ({type(exc).__name__}: {exc})"
    snap = lag.measure(topology, clients, links, unavailable=unavailable, now=now,
                       previous=read_lag_snapshot(topology.namespace))
    # what a planned failover of each group would replay and skip now (read-only, bounded; docs/lag.md)
    snap.failover = preview_failovers(topology, clients, group_owners(topology.namespace), snap.groups,
                                      snap.unreachable)
    return snap


def measure_lag(topology: Topology, now: datetime | None = None) -> dict[str, Any]:
    """What the ``measure`` task does: snapshot, log, store, audit; returns the snapshot as a dict."""
    snap = take_snapshot(topology, now)
    data = snap.to_dict()
    audited = audit_problems(topology.namespace)  # an audit violation is an SLA violation (docs/audit.md)
    if audited:
        data["violations"] = list(data["violations"]) + audited
        data["totals"]["violations"] = data["totals"].get("violations", 0) + len(audited)
        data["ok"] = False
    totals = data["totals"]
    for link_id, s in data["per_link"].items():
        log.info("link %-16s %s -> %s: %d records pending over %d partitions, oldest %.0fs%s", link_id, s["source"],
                 s["target"], s["records"], s["partitions"], s["max_seconds"],
                 f"; ERROR {'; '.join(s['errors'])}" if s["errors"] else "")
    log.info("link lag per partition (lagging or failing only):\n%s",
             lag.link_table(snap.links, only_lagging=True, limit=LOG_ROWS))
    log.info("consumer group lag:\n%s", lag.group_table(snap.groups, limit=LOG_ROWS))
    for cluster, reason in data["unreachable"].items():
        log.error("cluster %s: %s", cluster, reason)
    set_lag_snapshot(topology.namespace, data)
    journal_entry("lag_snapshot", topology=data["topology"], taken_at=data["taken_at"], ok=data["ok"], totals=totals,
                  violations=data["violations"][:20])
    return data


def check_sla(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Raise :class:`LagSlaExceeded` listing every violation of the snapshot; otherwise return its totals."""
    violations = snapshot.get("violations") or []
    if violations:
        lines = "\n  - ".join(violations)
        raise LagSlaExceeded(f"lag SLA exceeded: {len(violations)} violation(s) in the snapshot taken at "
                             f"{snapshot.get('taken_at')} (SLA {json.dumps(snapshot.get('sla', {}))}):\n  - {lines}")
    log.info("lag within the SLA %s", json.dumps(snapshot.get("sla", {})) if snapshot.get("sla") else "(none set)")
    return snapshot.get("totals", {})


def audit_problems(ns: str) -> list[str]:
    """The problems of the latest completeness audit (``mirrorflow_audit_result``); none before one ran."""
    summary = read_audit_result(ns)
    if not summary:
        return []
    return [f"completeness audit of {summary.get('checked_at')}: {p}" for p in summary_problems(summary)]
