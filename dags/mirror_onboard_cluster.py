"""Operator action: add a cluster with its history: mirror_onboard_cluster (contract)."""

from mirrorflow_airflow.factories.onboard import build_onboard_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_onboard_dag))
