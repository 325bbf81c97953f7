"""The topology as DAG files see it: the file at ``MIRROR_TOPOLOGY`` plus the operators' cluster changes.

A broken file makes the DAG file fail to import, so the error (which names the
key) shows up in the Airflow UI's import errors before anything is copied.
Clusters added by ``mirror_onboard_cluster`` and removed by
``mirror_decommission_cluster`` are applied on top (Airflow Variable
``mirrorflow_topology_changes``), so every DAG sees them from its next parse.
"""

from __future__ import annotations

from mirrorflow.topology import Topology, load_topology_from_env
from mirrorflow.topology.changes import apply_changes


def current_topology(changes: list[dict] | None = None) -> Topology:
    """The effective topology; ``changes`` overrides the stored cluster changes (tests, dry runs)."""
    if changes is None:
        from mirrorflow_airflow.state import cluster_changes

        changes = cluster_changes()
    return apply_changes(load_topology_from_env(), changes)
