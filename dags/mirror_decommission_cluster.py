"""Operator action: take a cluster out of the tree: mirror_decommission_cluster."""

from mirrorflow_airflow.factories.decommission import build_decommission_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_decommission_dag))
