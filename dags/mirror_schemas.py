"""The primary schema registry on every cluster: mirror_schemas (contract)."""

from mirrorflow_airflow.factories.schemas import DAG_ID, build_schemas_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_schemas_dag(current_topology())
