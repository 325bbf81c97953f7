"""Every DAG mirrorflow makes, from one DAG file: what the files of ``dags/`` make, one family each.

A DAG folder that is not this repository's (an Airflow a platform team already
runs) needs only this file, with ``MIRROR_TOPOLOGY`` naming the topology::

    from mirrorflow_airflow.factories.every import every_dag

    globals().update(every_dag())

The DAG ids are the same as the ``dags/`` files give (the contract): a folder
holds either those files or this one, never both. One file is parsed in one
process, so its parse holds every family of every tree; a broken topology fails
it whole, as it fails each of the twelve files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mirrorflow_airflow.topology import current_trees

if TYPE_CHECKING:
    from airflow.sdk import DAG

    from mirrorflow.topology import Topology


def families() -> list[Callable[[Topology], Any]]:
    """Each family's builder, in the order of ``dags/`` (imported here: a family's own DAG file imports one)."""
    from mirrorflow_airflow.factories.archive import build_archive_dag
    from mirrorflow_airflow.factories.audit import build_audit_dag
    from mirrorflow_airflow.factories.carry_checkpoints import build_carry_checkpoints_dag
    from mirrorflow_airflow.factories.decommission import build_decommission_dag
    from mirrorflow_airflow.factories.failover import build_failover_dag
    from mirrorflow_airflow.factories.lag_monitor import build_lag_monitor_dag
    from mirrorflow_airflow.factories.levels import build_level_dags
    from mirrorflow_airflow.factories.offsets import build_offsets_dag
    from mirrorflow_airflow.factories.onboard import build_onboard_dag
    from mirrorflow_airflow.factories.resolve_gap import build_resolve_gap_dag
    from mirrorflow_airflow.factories.schemas import build_schemas_dag
    from mirrorflow_airflow.factories.switch import build_switch_dag

    return [build_archive_dag, build_audit_dag, build_carry_checkpoints_dag, build_decommission_dag,
            build_failover_dag, build_lag_monitor_dag, build_level_dags, build_offsets_dag, build_onboard_dag,
            build_resolve_gap_dag, build_schemas_dag, build_switch_dag]


def every_dag() -> dict[str, DAG]:
    """Every family's DAGs of every tree of ``MIRROR_TOPOLOGY``, by DAG id; an id made twice is refused by name."""
    dags: dict[str, DAG] = {}
    builders = families()
    for tree in current_trees():
        for build in builders:
            built = build(tree)
            for dag in built.values() if isinstance(built, Mapping) else [built]:
                if dag.dag_id in dags:
                    raise ValueError(f"DAG id {dag.dag_id!r} is made twice (tree {tree.name!r}): two trees of "
                                     "MIRROR_TOPOLOGY share a namespace")
                dags[dag.dag_id] = dag
    return dags
