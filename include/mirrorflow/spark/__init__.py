"""How mirrorflow's jobs run on Spark, and the contract every Spark job keeps.

Three jobs run on Spark: the level copy (:mod:`mirrorflow.copy`), the onboarding
backfill (:mod:`mirrorflow.onboard.backfill`) and the archive run
(:mod:`mirrorflow.archive`). Each plans on its driver and hands Spark bins of
work; each is started by ``spark-submit`` of an entry point in ``spark_jobs/``,
or by the Airflow operator on a Spark Connect server. This package is the one
place that knows how, by what each module holds:

- :mod:`~mirrorflow.spark.contract`: :class:`SparkJobSpec` and :class:`SparkJobResult`,
  what every job is to whoever runs it (a spec read from its environment
  variable, cluster clients, a result with ``ok``, ``errors`` and JSON);
- :mod:`~mirrorflow.spark.run`: :func:`run_bins`, a job's bins as Spark tasks on a
  SparkContext or a Spark Connect session, and :func:`parallelism`;
- :mod:`~mirrorflow.spark.connect`: the Spark Connect session under mirrorflow's
  stable id (:func:`session`, or :func:`opening` it while the caller plans), URLs fit
  for a log (:func:`redact`), and the error of a job the server did not finish
  (:func:`job_failure`, :func:`server_lost`);
- :mod:`~mirrorflow.spark.entry`: :func:`run_entry`, what every entry point in
  ``spark_jobs/`` does around its job (spec in, result file out, exit code);
- :mod:`~mirrorflow.spark.driver`: a local driver JVM's shorter start.

Import from here: these names are the package's public face. Importing it
imports no pyspark (Spark executors and Airflow tasks import it; each module
imports pyspark where it starts or talks to Spark), and nothing of Airflow.
"""

from __future__ import annotations

from mirrorflow.spark.connect import job_failure, opening, redact, server_lost, session, session_id, with_session
from mirrorflow.spark.contract import SparkJobResult, SparkJobSpec
from mirrorflow.spark.driver import C1_ONLY, archive_path, driver_java_options, java_path
from mirrorflow.spark.entry import run_entry
from mirrorflow.spark.run import is_connect, parallelism, run_bins

__all__ = [
    "C1_ONLY",
    "SparkJobResult",
    "SparkJobSpec",
    "archive_path",
    "driver_java_options",
    "is_connect",
    "java_path",
    "job_failure",
    "opening",
    "parallelism",
    "redact",
    "run_bins",
    "run_entry",
    "server_lost",
    "session",
    "session_id",
    "with_session",
]
