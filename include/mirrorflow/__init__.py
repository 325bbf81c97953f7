"""mirrorflow core: the algorithms and Kafka plumbing of the mirroring platform.

This package must stay importable without Airflow: Spark executors and plain
shells import it too. Airflow glue lives in ``plugins/`` and ``dags/``.
"""

__version__ = "0.1.0"
