"""Operator action: move consumer groups to another cluster: mirror_failover_consumer_group (contract)."""

from mirrorflow_airflow.factories.failover import build_failover_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_failover_dag))
