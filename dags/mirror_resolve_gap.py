"""Operator action: decide for a partition a level run stopped on: mirror_resolve_gap."""

from mirrorflow_airflow.factories.resolve_gap import build_resolve_gap_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_resolve_gap_dag))
