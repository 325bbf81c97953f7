"""The mirrored topics in S3, for history beyond retention: mirror_archive."""

from mirrorflow_airflow.factories.archive import build_archive_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_archive_dag))
