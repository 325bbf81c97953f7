"""Airflow glue for mirrorflow: hooks, DAG factories, (later) operators, sensors, triggers.

Everything Airflow-specific lives here or in dags/; the algorithms live in the
core package ``mirrorflow``, which never imports Airflow.
"""
