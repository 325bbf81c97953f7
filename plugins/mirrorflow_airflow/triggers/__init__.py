"""Triggers: waits that run in Airflow's triggerer (outside dags/, so the triggerer can import them)."""
