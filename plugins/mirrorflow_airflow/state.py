"""Operator state that must outlive a run and needs no file edit: the effective target of each link.

Kept as one Airflow Variable (``mirrorflow_link_targets``, JSON ``{link id:
target}``) in Airflow's metadata database: durable, visible under Admin ->
Variables, and read by every level run at run time (not parse time), so a
switch takes effect from the next run without a restart. Links not listed use
their default target from the topology.
"""

from __future__ import annotations

import json

from airflow.sdk import Variable

TARGETS_VARIABLE = "mirrorflow_link_targets"


def link_targets() -> dict[str, str]:
    raw = Variable.get(TARGETS_VARIABLE, default=None)
    if not raw:
        return {}
    data = json.loads(raw) if isinstance(raw, str) else raw
    return {str(k): str(v) for k, v in dict(data).items()}


def set_link_target(link_id: str, target: str, default_target: str) -> dict[str, str]:
    """Record ``target`` for ``link_id`` (dropping the entry when it is the default); returns the new map."""
    targets = link_targets()
    if target == default_target:
        targets.pop(link_id, None)
    else:
        targets[link_id] = target
    Variable.set(TARGETS_VARIABLE, json.dumps(targets, sort_keys=True),
                 description="mirrorflow: effective targets of switched links (written by mirror_switch_target)")
    return targets


# --------------------------------------------------------------------------- consumer group owners

OWNERS_VARIABLE = "mirrorflow_group_owners"


def group_owners() -> dict[str, str]:
    """Which cluster each distributed consumer group runs on (Variable ``mirrorflow_group_owners``).

    ``mirror_offsets`` records the cluster where a group has members; a
    failover records its target. A group idle everywhere keeps its last owner,
    whose committed offsets stay the truth the other clusters follow.
    """
    raw = Variable.get(OWNERS_VARIABLE, default=None)
    if not raw:
        return {}
    data = json.loads(raw) if isinstance(raw, str) else raw
    return {str(k): str(v) for k, v in dict(data).items()}


def set_group_owners(owners: dict[str, str]) -> None:
    Variable.set(OWNERS_VARIABLE, json.dumps(dict(sorted(owners.items()))),
                 description="mirrorflow: cluster each consumer group runs on (written by mirror_offsets and "
                             "mirror_failover_consumer_group)")


# --------------------------------------------------------------------------- cluster changes

CHANGES_VARIABLE = "mirrorflow_topology_changes"


def cluster_changes() -> list[dict]:
    """Onboarded and decommissioned clusters, in order (see :mod:`mirrorflow.topology.changes`).

    Read at DAG parse time too: the dag-processor serves Variables to the files
    it parses, so a change shows in every DAG from its next parse. Outside a
    task or the dag-processor (a plain Python shell) Airflow only looks at
    environment variables; there the changes are not seen.
    """
    raw = Variable.get(CHANGES_VARIABLE, default=None)
    if not raw:
        return []
    data = json.loads(raw) if isinstance(raw, str) else raw
    return [dict(event) for event in data]


def record_change(event: dict) -> list[dict]:
    """Append ``event`` unless an equal one is already the last event for that cluster; returns the list."""
    events = cluster_changes()
    mine = [e for e in events if e.get("cluster") == event.get("cluster")]
    core = {k: v for k, v in event.items() if k not in ("at", "run_id")}
    if mine and {k: v for k, v in mine[-1].items() if k not in ("at", "run_id")} == core:
        return events
    events.append(event)
    Variable.set(CHANGES_VARIABLE, json.dumps(events, sort_keys=True),
                 description="mirrorflow: clusters added and removed by mirror_onboard_cluster and "
                             "mirror_decommission_cluster, applied on top of the topology file")
    return events


def set_link_targets(targets: dict[str, str]) -> None:
    """Replace the whole map of effective link targets (onboarding pins, decommission switches)."""
    Variable.set(TARGETS_VARIABLE, json.dumps(dict(sorted(targets.items()))),
                 description="mirrorflow: effective targets of switched links (written by mirror_switch_target)")


# --------------------------------------------------------------------------- onboarding in progress

ONBOARDING_VARIABLE = "mirrorflow_onboarding"


def onboarding(cluster: str) -> dict | None:
    """What an earlier attempt to onboard ``cluster`` recorded (so a re-run continues), or None."""
    raw = Variable.get(ONBOARDING_VARIABLE, default=None)
    data = (json.loads(raw) if isinstance(raw, str) else raw) if raw else {}
    return data.get(cluster)


def record_onboarding(cluster: str, record: dict | None) -> None:
    """Store (or with ``None`` drop) the onboarding record of ``cluster``."""
    raw = Variable.get(ONBOARDING_VARIABLE, default=None)
    data = (json.loads(raw) if isinstance(raw, str) else raw) if raw else {}
    if record is None:
        data.pop(cluster, None)
    else:
        data[cluster] = record
    Variable.set(ONBOARDING_VARIABLE, json.dumps(data, sort_keys=True),
                 description="mirrorflow: onboardings in progress (written by mirror_onboard_cluster)")
