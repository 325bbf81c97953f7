"""``mirror_lag_monitor`` (contract): measure lag per link and per consumer group; fail past the SLA.

Each run takes one snapshot (:mod:`mirrorflow.lag`):

- ``measure``: every link of every level, on its *effective* target (operator
  switches from the Airflow Variable ``mirrorflow_link_targets``), per source
  topic-partition: records not yet copied and the age of the oldest of them;
  and every selected consumer group (``offsets.groups`` of the topology,
  mirrorflow's own groups never) on every cluster: records not yet consumed
  and their age, with the group's state and member count. An unreachable
  cluster is recorded as such; the rest is still measured. The snapshot is
  stored in the Airflow Variable ``mirrorflow_lag_snapshot`` (JSON; Admin ->
  Variables, or :func:`read_lag_snapshot` from any task) and returned as the
  task's XCom; the task log shows a table per link and per group and one
  ``lag_snapshot`` audit line with the totals.
- ``check``: fails, without retrying, listing every violation when the
  topology's ``lag`` section sets a bound that is exceeded (an unreachable
  cluster counts when a bound applies to what it would have measured).

Schedule: ``lag.schedule`` of the topology (default every minute); one run at
a time, no catch-up. Format of the snapshot: docs/lag.md.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from airflow.sdk import DAG, Variable, task
from airflow.sdk.exceptions import AirflowFailException

from mirrorflow import lag
from mirrorflow.audit import audit
from mirrorflow.copy.links import effective_links
from mirrorflow.errors import MirrorflowError
from mirrorflow.topology import Topology
from mirrorflow.topology.replication import parse_schedule
from mirrorflow_airflow.defaults import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.state import link_targets

log = logging.getLogger(__name__)

DAG_ID = "mirror_lag_monitor"
#: Airflow Variable holding the latest snapshot (JSON).
SNAPSHOT_VARIABLE = "mirrorflow_lag_snapshot"
#: Rows per table in the task log (the snapshot itself has every row).
LOG_ROWS = 200


class LagSlaExceeded(AirflowFailException, MirrorflowError):
    """The lag SLA of the topology is exceeded. Not retried: a retry would read the same snapshot."""


def take_snapshot(topology: Topology, now: datetime | None = None) -> lag.LagSnapshot:
    """One measurement of every link (effective targets) and every selected group on every cluster."""
    targets = link_targets()
    links = [l for level in topology.levels for l in effective_links(topology, level, targets)]
    clients, unavailable = {}, {}
    for name in sorted(topology.clusters):
        try:
            clients[name] = MirrorClusterHook(topology, name).client()
        except Exception as exc:  # a missing connection must not hide the other clusters
            unavailable[name] = f"has no client settings ({type(exc).__name__}: {exc})"
    return lag.measure(topology, clients, links, unavailable=unavailable, now=now)


def measure_lag(topology: Topology, now: datetime | None = None) -> dict[str, Any]:
    """What the ``measure`` task does: snapshot, log, store, audit; returns the snapshot as a dict."""
    snap = take_snapshot(topology, now)
    data = snap.to_dict()
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
    Variable.set(SNAPSHOT_VARIABLE, json.dumps(data, sort_keys=True),
                 description="mirrorflow: latest lag snapshot per link-partition and consumer group "
                             "(written by mirror_lag_monitor; format in docs/lag.md)")
    audit("lag_snapshot", topology=data["topology"], taken_at=data["taken_at"], ok=data["ok"], totals=totals,
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


def read_lag_snapshot() -> dict[str, Any] | None:
    """The latest snapshot stored by ``mirror_lag_monitor`` (``None`` before its first run)."""
    raw = Variable.get(SNAPSHOT_VARIABLE, default=None)
    if not raw:
        return None
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def build_lag_monitor_dag(topology: Topology) -> DAG:
    bounds = topology.lag.model_dump(mode="json", exclude_defaults=True)
    with DAG(
        dag_id=DAG_ID,
        description="Measure replication lag per link and consumer-group lag per cluster; fail past the SLA",
        schedule=parse_schedule(topology.lag.schedule),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=tags("monitoring", "lag"),
        doc_md=__doc__,
    ) as dag:

        @task
        def measure() -> dict[str, Any]:
            """Measure every link and group; store the snapshot in the Variable mirrorflow_lag_snapshot."""
            return measure_lag(topology, datetime.now(timezone.utc))

        @task(doc_md="Fail, without retrying, when the snapshot exceeds the topology's lag settings: "
                     + (json.dumps(bounds) if bounds else "none set"))
        def check(snapshot: dict[str, Any]) -> dict[str, Any]:
            return check_sla(snapshot)

        check(measure())
    return dag
