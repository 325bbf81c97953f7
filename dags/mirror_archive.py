"""The mirrored topics in S3, for history beyond retention: mirror_archive."""

from mirrorflow_airflow.factories.archive import DAG_ID, build_archive_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_archive_dag(current_topology())
