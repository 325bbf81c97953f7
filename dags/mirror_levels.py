"""Replication DAGs, one per level of the topology: mirror_level_<L> (contract)."""

from mirrorflow_airflow.factories.levels import build_level_dags
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_level_dags))
