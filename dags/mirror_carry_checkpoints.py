"""Operator action: after renumbering the levels, carry checkpoints to the new link ids: mirror_carry_checkpoints."""

from mirrorflow_airflow.factories.carry_checkpoints import build_carry_checkpoints_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_carry_checkpoints_dag))
