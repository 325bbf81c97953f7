"""Operator action: switch a level's target within its subtree: mirror_switch_target (contract)."""

from mirrorflow_airflow.factories.switch import build_switch_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_switch_dag))
