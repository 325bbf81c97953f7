"""Operator state that must outlive a run and needs no file edit, kept in Airflow Variables.

The effective target of each link (``mirrorflow_link_targets``, JSON ``{link id:
target}``; links not listed use their default target), the clusters added and
removed by operators (``mirrorflow_topology_changes``), consumer-group owners,
onboardings in progress, each live cluster's names, what the level runs copied,
the open alert incidents, and the latest lag snapshot and completeness audit:
durable, in Airflow's metadata database, visible under Admin -> Variables.
Every Variable mirrorflow keeps is named here, so the steps that write one and
the readers of the Mirror page share its name. Each function takes the tree's
namespace first (``topology.namespace``): one of several trees in one Airflow
keeps its Variables under ``<name>.`` (:func:`mirrorflow.topology.in_tree`).

Some of it is read when DAG files are parsed, and Airflow 3 parses them in
several contexts: the dag-processor and task runners reach Variables through
the Task SDK, but a parse in a plain process (``airflow dags test``, ``airflow
dags list``, ``dag.test()``) gets ``None`` from it without a word, and would
show an older tree. :func:`read_variable` reads the metadata database directly
there, and fails (the DAG file's import error names why) where neither is
possible: never a silently different topology.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from airflow.sdk import Variable

from mirrorflow import formats
from mirrorflow.lag.backoff import Failing
from mirrorflow.status.totals import fold
from mirrorflow.topology import in_tree


class StateUnreadable(RuntimeError):
    """A stored state the topology depends on cannot be read in this process."""


def _sdk_reaches_variables() -> bool:
    """Whether the Task SDK's ``Variable.get`` sees the metadata database here (a task, the dag-processor, a server)."""
    try:
        from airflow.sdk.execution_time import task_runner
    except ImportError:
        return False
    return (getattr(task_runner, "SUPERVISOR_COMMS", None) is not None
            or os.environ.get("_AIRFLOW_PROCESS_CONTEXT") == "server")


def read_variable(key: str) -> Any:
    """The raw value of Variable ``key`` (``None`` when it is not set), the same in every context.

    Through the Task SDK where it reaches the metadata database; elsewhere through
    Airflow's own model, which reads the database (and the environment's
    ``AIRFLOW_VAR_*``) directly. Raises :class:`StateUnreadable` when neither can,
    and :class:`~mirrorflow.formats.NewerFormat` when a newer mirrorflow keeps them.
    """
    _check_format()
    return _read(key)


def _read(key: str) -> Any:
    if _sdk_reaches_variables():
        return Variable.get(key, default=None)
    try:
        from airflow.models import Variable as StoredVariable

        return StoredVariable.get(key, default_var=None)
    except Exception as exc:
        raise StateUnreadable(
            f"mirrorflow: Variable {key} cannot be read in this process ({type(exc).__name__}: {exc}); the DAGs "
            f"depend on it and would otherwise show a different tree than the scheduler's. Run with access to "
            f"Airflow's metadata database (AIRFLOW__DATABASE__SQL_ALCHEMY_CONN)") from exc

#: The format of the Variables below as a whole (mirrorflow.formats, "airflow-state"): one marker for this
#: Airflow, written with the first write of a release that knows it; missing means the first release's format.
FORMAT_VARIABLE = "mirrorflow_state_format"
_CURRENT = str(formats.FORMATS["airflow-state"].version)
#: Read once per process (the marker only ever goes up): whether it was checked, and whether it says this format.
_format_checked = False
_marked = False


def check_format_marker(raw: Any) -> bool:
    """Refuse, by name, the marker ``raw`` (as stored) of Variables a newer mirrorflow keeps; whether it says
    this format. The Mirror page reads it too, so it never shows a newer release's state as if it were its own."""
    found = 1 if raw in (None, "") else (int(raw) if str(raw).strip().isdigit() else str(raw))
    formats.check("airflow-state", found, f"Airflow Variable {FORMAT_VARIABLE}")
    return raw is not None and str(raw).strip() == _CURRENT


def _check_format() -> None:
    """Refuse, by name, Variables a newer mirrorflow keeps."""
    global _format_checked, _marked
    if _format_checked:
        return
    _marked = check_format_marker(_read(FORMAT_VARIABLE))
    _format_checked = True


def _set(key: str, value: str, description: str) -> None:
    """Write Variable ``key``, after marking the format it is written in (the marker first: never unmarked state)."""
    global _marked
    _check_format()
    if not _marked:
        _write(FORMAT_VARIABLE, _CURRENT, "mirrorflow: the format of its Variables (docs/install.md, CHANGELOG.md)")
        _marked = True
    _write(key, value, description)


def _write(key: str, value: str, description: str) -> None:
    """Through the Task SDK in a task; elsewhere (a script, a test) through Airflow's model, as :func:`_read`."""
    if _sdk_reaches_variables():
        Variable.set(key, value, description=description)
        return
    from airflow.models import Variable as StoredVariable

    StoredVariable.set(key, value, description=description)


TARGETS_VARIABLE = "mirrorflow_link_targets"


def link_targets(ns: str) -> dict[str, str]:
    raw = read_variable(in_tree(ns, TARGETS_VARIABLE))
    if not raw:
        return {}
    data = json.loads(raw) if isinstance(raw, str) else raw
    return {str(k): str(v) for k, v in dict(data).items()}


def set_link_target(ns: str, link_id: str, target: str, default_target: str) -> dict[str, str]:
    """Record ``target`` for ``link_id`` (dropping the entry when it is the default); returns the new map."""
    targets = link_targets(ns)
    if target == default_target:
        targets.pop(link_id, None)
    else:
        targets[link_id] = target
    _set(in_tree(ns, TARGETS_VARIABLE), json.dumps(targets, sort_keys=True),
         description="mirrorflow: effective targets of switched links (written by mirror_switch_target)")
    return targets


# --------------------------------------------------------------------------- consumer group owners

OWNERS_VARIABLE = "mirrorflow_group_owners"


def group_owners(ns: str) -> dict[str, str]:
    """Which cluster each distributed consumer group runs on (Variable ``mirrorflow_group_owners``).

    ``mirror_offsets`` records the cluster where a group has members; a
    failover records its target. A group idle everywhere keeps its last owner,
    whose committed offsets stay the truth the other clusters follow.
    """
    raw = read_variable(in_tree(ns, OWNERS_VARIABLE))
    if not raw:
        return {}
    data = json.loads(raw) if isinstance(raw, str) else raw
    return {str(k): str(v) for k, v in dict(data).items()}


def set_group_owners(ns: str, owners: dict[str, str]) -> None:
    _set(in_tree(ns, OWNERS_VARIABLE), json.dumps(dict(sorted(owners.items()))),
         description="mirrorflow: cluster each consumer group runs on (written by mirror_offsets and "
                     "mirror_failover_consumer_group)")


# --------------------------------------------------------------------------- cluster changes

CHANGES_VARIABLE = "mirrorflow_topology_changes"


def cluster_changes(ns: str) -> list[dict]:
    """Onboarded and decommissioned clusters, in order (see :mod:`mirrorflow.topology.changes`).

    Read at DAG parse time too, in every context the same (:func:`read_variable`),
    so a change shows in every DAG from its next parse.
    """
    raw = read_variable(in_tree(ns, CHANGES_VARIABLE))
    if not raw:
        return []
    data = json.loads(raw) if isinstance(raw, str) else raw
    return [dict(event) for event in data]


def record_change(ns: str, event: dict) -> list[dict]:
    """Append ``event`` unless an equal one is already the last event for that cluster; returns the list."""
    events = cluster_changes(ns)
    mine = [e for e in events if e.get("cluster") == event.get("cluster")]
    core = {k: v for k, v in event.items() if k not in ("at", "run_id")}
    if mine and {k: v for k, v in mine[-1].items() if k not in ("at", "run_id")} == core:
        return events
    events.append(event)
    _set(in_tree(ns, CHANGES_VARIABLE), json.dumps(events, sort_keys=True),
         description="mirrorflow: clusters added and removed by mirror_onboard_cluster and "
                     "mirror_decommission_cluster, applied on top of the topology file")
    return events


def set_link_targets(ns: str, targets: dict[str, str]) -> None:
    """Replace the whole map of effective link targets (onboarding pins, decommission switches)."""
    _set(in_tree(ns, TARGETS_VARIABLE), json.dumps(dict(sorted(targets.items()))),
         description="mirrorflow: effective targets of switched links (written by mirror_switch_target)")


# --------------------------------------------------------------------------- onboarding in progress

ONBOARDING_VARIABLE = "mirrorflow_onboarding"


def onboarding(ns: str, cluster: str) -> dict | None:
    """What an earlier attempt to onboard ``cluster`` recorded (so a re-run continues), or None."""
    return (_json_variable(in_tree(ns, ONBOARDING_VARIABLE)) or {}).get(cluster)


def record_onboarding(ns: str, cluster: str, record: dict | None) -> None:
    """Store (or with ``None`` drop) the onboarding record of ``cluster``."""
    _update_per_cluster(in_tree(ns, ONBOARDING_VARIABLE), {cluster: record},
                        "mirrorflow: onboardings in progress (written by mirror_onboard_cluster)")


def _update_per_cluster(key: str, updates: Mapping[str, Any], description: str) -> None:
    """Set (or with ``None`` drop) entries of a Variable that holds one JSON entry per cluster."""
    data = _json_variable(key) or {}
    for cluster, entry in updates.items():
        if entry is None:
            data.pop(cluster, None)
        else:
            data[cluster] = entry
    _set(key, json.dumps(data, sort_keys=True), description=description)


# --------------------------------------------------------------------------- each live cluster's names

NAMES_VARIABLE = "mirrorflow_cluster_names"


def recorded_names(ns: str) -> dict[str, dict[str, str]]:
    """What each cluster stored topics and groups under when the level runs last copied to or from it."""
    return _json_variable(in_tree(ns, NAMES_VARIABLE)) or {}


def record_names(ns: str, names: Mapping[str, dict[str, str] | None]) -> None:
    """Store (or with ``None`` drop) clusters' names: the level runs hold a live cluster to them (docs/naming.md)."""
    _update_per_cluster(in_tree(ns, NAMES_VARIABLE), names,
                        "mirrorflow: the topic and group names of each live cluster, as the level runs found them; "
                        "a changed clusters.<c>.names is refused until the cluster is onboarded again "
                        "(docs/naming.md)")


# --------------------------------------------------------------------------- what the level runs copied

COPY_TOTALS_PREFIX = "mirrorflow_copy_totals_level_"


def record_copy_totals(ns: str, level: int, partitions: list[dict], *, finished_at: float, run_id: str) -> None:
    """Fold one level run's partition rows into the level's running totals (status page, metrics).

    One Variable per level: a level runs one micro-batch at a time, so its
    read-fold-write never races another writer.
    """
    key = in_tree(ns, f"{COPY_TOTALS_PREFIX}{level}")
    raw = read_variable(key)
    previous = (json.loads(raw) if isinstance(raw, str) else dict(raw)) if raw else None
    _set(key, json.dumps(fold(previous, partitions, finished_at=finished_at, run_id=run_id), sort_keys=True),
         description=f"mirrorflow: records and bytes copied per level-{level} link-partition, last success "
                     f"and failure (written by mirror_level_{level}; docs/metrics.md)")


# --------------------------------------------------------------------------- what the last level run failed

FAILING_PREFIX = "mirrorflow_failing_level_"


def read_failing(ns: str, level: int) -> Failing | None:
    """The links and partitions the latest finished run of level ``level`` failed (``None``: none recorded)."""
    return Failing.from_dict(_json_variable(in_tree(ns, f"{FAILING_PREFIX}{level}")))


def record_failing(ns: str, level: int, failing: Failing) -> None:
    """Record what a level run failed, for the ``on_data`` watcher's back-off (mirrorflow.lag.backoff).

    A run that failed nothing writes only when the stored record names failures, so healthy
    runs cost a read and no write.
    """
    key = in_tree(ns, f"{FAILING_PREFIX}{level}")
    if not failing.keys:
        stored = read_failing(ns, level)
        if stored is None or not stored.keys:
            return
    _set(key, json.dumps(failing.to_dict(), sort_keys=True),
         description=f"mirrorflow: the links and partitions the latest mirror_level_{level} run failed; the "
                     f"on_data watcher backs off from them (docs/levels.md)")


# --------------------------------------------------------------------------- open alert incidents

INCIDENTS_VARIABLE = "mirrorflow_alert_incidents"


def open_incidents(ns: str) -> dict[str, dict[str, Any]]:
    """The incidents alerted and not yet over (Variable ``mirrorflow_alert_incidents``; docs/alerts.md)."""
    raw = read_variable(in_tree(ns, INCIDENTS_VARIABLE))
    if not raw:
        return {}
    data = json.loads(raw) if isinstance(raw, str) else raw
    return {str(k): dict(v) for k, v in dict(data).items()}


def set_open_incidents(ns: str, incidents: dict[str, dict[str, Any]]) -> None:
    _set(in_tree(ns, INCIDENTS_VARIABLE), json.dumps(dict(sorted(incidents.items())), sort_keys=True),
         description="mirrorflow: open alert incidents, one message each (written by the alert notifiers "
                     "of mirror_lag_monitor, mirror_level_<L> and mirror_audit; docs/alerts.md)")


# --------------------------------------------------------------------------- what the monitors found last

#: The latest lag snapshot (JSON; docs/lag.md, "Snapshot format"), written by ``mirror_lag_monitor``.
LAG_SNAPSHOT_VARIABLE = "mirrorflow_lag_snapshot"
#: The latest completeness audit's summary (JSON; docs/audit.md), written by ``mirror_audit``.
AUDIT_RESULT_VARIABLE = "mirrorflow_audit_result"


def _json_variable(key: str) -> dict[str, Any] | None:
    raw = read_variable(key)
    if not raw:
        return None
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def read_lag_snapshot(ns: str) -> dict[str, Any] | None:
    """The latest snapshot stored by ``mirror_lag_monitor`` (``None`` before its first run)."""
    return _json_variable(in_tree(ns, LAG_SNAPSHOT_VARIABLE))


def set_lag_snapshot(ns: str, snapshot: dict[str, Any]) -> None:
    _set(in_tree(ns, LAG_SNAPSHOT_VARIABLE), json.dumps(snapshot, sort_keys=True),
         description="mirrorflow: latest lag snapshot per link-partition and consumer group "
                     "(written by mirror_lag_monitor; format in docs/lag.md)")


def read_audit_result(ns: str) -> dict[str, Any] | None:
    """The latest summary stored by ``mirror_audit`` (``None`` before its first run)."""
    return _json_variable(in_tree(ns, AUDIT_RESULT_VARIABLE))


def set_audit_result(ns: str, summary: dict[str, Any]) -> None:
    _set(in_tree(ns, AUDIT_RESULT_VARIABLE), json.dumps(summary, sort_keys=True),
         description="mirrorflow: latest completeness audit (written by mirror_audit; docs/audit.md)")
