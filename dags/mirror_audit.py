"""Every cluster holds every message of every origin exactly once, counted per window: mirror_audit."""

from mirrorflow_airflow.factories.audit import build_audit_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_audit_dag))
