"""Operator action: after renumbering the levels, carry checkpoints to the new link ids: mirror_carry_checkpoints."""

from mirrorflow_airflow.factories.carry_checkpoints import DAG_ID, build_carry_checkpoints_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_carry_checkpoints_dag(current_topology())
