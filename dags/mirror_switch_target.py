"""Operator action: switch a level's target within its subtree: mirror_switch_target (contract)."""

from mirrorflow_airflow.factories.switch import DAG_ID, build_switch_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_switch_dag(current_topology())
