"""Consumer-group offsets on every cluster: mirror_offsets (contract)."""

from mirrorflow_airflow.factories.offsets import build_offsets_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_offsets_dag))
