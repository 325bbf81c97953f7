"""Operator action: take a cluster out of the tree: mirror_decommission_cluster."""

from mirrorflow_airflow.factories.decommission import DAG_ID, build_decommission_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_decommission_dag(current_topology())
