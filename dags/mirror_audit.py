"""Every cluster holds every message of every origin exactly once, counted per window: mirror_audit."""

from mirrorflow_airflow.factories.audit import DAG_ID, build_audit_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_audit_dag(current_topology())
