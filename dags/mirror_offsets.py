"""Consumer-group offsets on every cluster: mirror_offsets (contract)."""

from mirrorflow_airflow.factories.offsets import DAG_ID, build_offsets_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_offsets_dag(current_topology())
