"""Lag per link and per consumer group, alerting past the SLA: mirror_lag_monitor (contract)."""

from mirrorflow_airflow.factories.lag_monitor import build_lag_monitor_dag
from mirrorflow_airflow.topology import every_tree

globals().update(every_tree(build_lag_monitor_dag))
