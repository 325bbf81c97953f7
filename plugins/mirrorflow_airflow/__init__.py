"""Airflow glue for mirrorflow: DAG factories, their steps, operators, sensors, triggers, hooks, run state.

Everything Airflow-specific lives here or in dags/; the algorithms live in the
core package ``mirrorflow``, which never imports Airflow. Inside, imports point
one way: ``factories`` (the wiring of each DAG, its header from
``dag_header``) use ``steps`` (what each task does), operators and sensors;
those use ``hooks``, ``state`` and ``clusters``.
"""
