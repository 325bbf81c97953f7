"""Operator action: move consumer groups to another cluster: mirror_failover_consumer_group (contract)."""

from mirrorflow_airflow.factories.failover import DAG_ID, build_failover_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_failover_dag(current_topology())
