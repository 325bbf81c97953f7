"""Lag per link and per consumer group, alerting past the SLA: mirror_lag_monitor (contract)."""

from mirrorflow_airflow.factories.lag_monitor import DAG_ID, build_lag_monitor_dag
from mirrorflow_airflow.topology import current_topology

globals()[DAG_ID] = build_lag_monitor_dag(current_topology())
