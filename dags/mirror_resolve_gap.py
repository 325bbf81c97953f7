"""Operator action: decide for a partition a level run stopped on: mirror_resolve_gap."""

from mirrorflow_airflow.factories.resolve_gap import DAG_ID, build_resolve_gap_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_resolve_gap_dag(current_topology())
