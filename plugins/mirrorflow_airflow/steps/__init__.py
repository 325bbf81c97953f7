"""What each DAG's tasks do, one module per DAG, apart from the wiring in :mod:`mirrorflow_airflow.factories`.

A step is a plain function of the topology and the task's inputs: it reads
the clusters and the operator state, calls the core, logs the tables an
operator reads, and raises the Airflow exception that decides whether a
failure is retried. Keeping them out of the factories lets a factory read as
the DAG's table of contents and lets tests call a step without a DAG run.
"""
