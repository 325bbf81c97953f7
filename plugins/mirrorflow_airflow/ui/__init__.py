"""The "Mirror" page in the Airflow UI, its JSON API and the Prometheus metrics (docs/status.md).

``app`` is the FastAPI app (mounted at ``/mirror``), ``readers`` reads what the
DAGs stored, ``plugin`` registers both with Airflow. What is shown is built by
the core (:mod:`mirrorflow.status`).
"""
