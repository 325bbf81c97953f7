"""The primary schema registry on every cluster: mirror_schemas (contract)."""

from mirrorflow_airflow.factories.schemas import build_schemas_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_schemas_dag))
