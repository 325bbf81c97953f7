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
