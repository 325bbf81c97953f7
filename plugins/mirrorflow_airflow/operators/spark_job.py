"""Submit one of mirrorflow's Spark jobs and read its result: the part every job operator shares.

Each job (level copy, onboarding backfill, archive) takes its spec, credentials
included, in one environment variable of ``spark-submit`` (never the command
line, the rendered template fields or the task log) and writes its result as
JSON to a private temporary file. Exit code 2 still writes a result that names
every failure, so the caller reports those instead of a bare exit code.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from mirrorflow.errors import MirrorflowError
from mirrorflow_airflow.spark import core_zip, spark_conf


class MirrorSparkJobOperator(SparkSubmitOperator):
    """A SparkSubmitOperator whose job spec travels in the environment and whose result comes back as JSON."""

    def __init__(self, *, application: str, name: str, spark_conn_id: str = "spark_default", **kwargs: Any) -> None:
        super().__init__(application=application, conn_id=spark_conn_id, name=name, **kwargs)

    def submit(self, context: Any, env: dict[str, str]) -> dict[str, Any]:
        """Run the job with ``env``; return its result (raise if it wrote none)."""
        master = SparkSubmitHook(conn_id=self._conn_id)._resolve_connection()["master"]
        if master.startswith(("yarn", "k8s")):
            raise MirrorflowError(
                f"Spark master {master!r}: mirrorflow jobs pass cluster credentials to their driver in the "
                f"environment, which spark-submit forwards on the command line for YARN and Kubernetes; run them "
                f"on local[*] or a standalone cluster (spark://...) in client deploy mode")
        with tempfile.TemporaryDirectory(prefix="mirrorflow-job-") as tmp:
            result_path = Path(tmp) / "result.json"
            self.application_args = ["--result", str(result_path)]
            self.py_files = str(core_zip(Path(tmp)))
            self.conf = {**spark_conf(master), **(self.conf or {})}
            self.env_vars = dict(env)
            failure: Exception | None = None
            try:
                SparkSubmitOperator.execute(self, context)
            except Exception as exc:  # exit code 2 still writes a result naming each failure
                failure = exc
            finally:
                self.env_vars = None
            if not result_path.exists():
                raise failure or MirrorflowError("the Spark job wrote no result")
            return json.loads(result_path.read_text(encoding="utf-8"))
