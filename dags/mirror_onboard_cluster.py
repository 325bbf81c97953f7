"""Operator action: add a cluster with its history: mirror_onboard_cluster (contract)."""

from mirrorflow_airflow.factories.onboard import DAG_ID, build_onboard_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_onboard_dag(current_topology())
