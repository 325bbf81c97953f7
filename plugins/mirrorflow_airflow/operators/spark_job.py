"""Run one of mirrorflow's Spark jobs and read its result: the part every job operator shares.

The Airflow Spark connection says where and how (``spark_conn_id``, default
``spark_default``):

- a ``spark`` connection (``local[*]``, ``spark://...``): ``spark-submit`` of the
  job's entry point. The spec, credentials included, goes in one environment
  variable (never the command line, the rendered template fields or the task
  log) and the result comes back as JSON in a private temporary file. Exit code 2
  still writes a result that names every failure, so the caller reports those
  instead of a bare exit code;
- a ``spark_connect`` connection (``sc://host:port``, token and TLS from the
  connection): the job's driver part (planning, audit) runs in this task and its
  Spark tasks on the Connect server, which stays up between runs, so a
  micro-batch skips Spark's start-up (:mod:`mirrorflow.spark.run`). The result is
  the same dict. Killing the task interrupts the job on the server.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.common.compat.sdk import BaseHook

from mirrorflow.errors import MirrorflowError
from mirrorflow.lineage import Lineage
from mirrorflow.spark import SparkJobResult, SparkJobSpec, job_failure, opening, redact
from mirrorflow.spark import session as connect_session
from mirrorflow_airflow.lineage import operator_lineage
from mirrorflow_airflow.spark import core_zip, spark_conf

log = logging.getLogger(__name__)

#: The spec type of the job an operator runs.
SpecT = TypeVar("SpecT", bound=SparkJobSpec)


class MirrorSparkJobOperator(SparkSubmitOperator, Generic[SpecT]):
    """Run a mirrorflow Spark job with ``spark-submit`` or on a Spark Connect server; return its result as a dict.

    ``run`` is the job's function (``run(spec, spark) -> result``), which the
    Connect path calls in this process; ``spark-submit`` gets the spec in the
    environment variable the spec names (:class:`mirrorflow.spark.SparkJobSpec`).
    """

    def __init__(self, *, application: str, name: str, run: Callable[[SpecT, Any], SparkJobResult],
                 spark_conn_id: str = "spark_default", plans_while_opening: bool = False, **kwargs: Any) -> None:
        super().__init__(application=application, conn_id=spark_conn_id, name=name, **kwargs)
        self.run_job = run
        #: ``run`` takes the Connect session as a future and plans while it opens (mirrorflow.spark.opening).
        self.plans_while_opening = plans_while_opening
        self._connect: tuple[str, str] | None = None  # (URL, tag) of a job running on Spark Connect
        #: What the job read and wrote, set from its result (OpenLineage reads it when the task ends).
        self.lineage: Lineage | None = None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The copy's input and output datasets (the OpenLineage provider calls this; failures fall back to it)."""
        return operator_lineage(self.lineage) if self.lineage is not None else None

    def submit(self, context: Any, spec: SpecT) -> dict[str, Any]:
        """Run the job on ``spec``; return its result (raise if there is none)."""
        self.lineage = None  # a previous run's, in a process that runs the task again (dag.test())
        if BaseHook.get_connection(self._conn_id).conn_type == SparkConnectHook.conn_type:
            return self._run_on_connect(context, spec)
        return self._spark_submit(context, {spec.env: spec.to_json()})

    def _run_on_connect(self, context: Any, spec: SpecT) -> dict[str, Any]:
        url = SparkConnectHook(self._conn_id).get_connection_url()
        # Tags name the job so that on_kill interrupts it (and only it) on the server.
        tag = re.sub(r"[^A-Za-z0-9_.-]", "_", f"mirrorflow-{self.task_id}-{context['run_id']}")
        log.info("%s: running on the Spark Connect server %s (connection %s)", self.name, redact(url), self._conn_id)
        def tagged(spark: Any) -> None:
            spark.addTag(tag)
            self._connect = (url, tag)

        try:
            with opening(url, then=tagged) as spark:
                result = self.run_job(spec, spark if self.plans_while_opening else spark.result())
        except MirrorflowError:
            raise
        except Exception as exc:
            raise job_failure(self.name, url, self._conn_id, exc) from exc
        finally:
            self._connect = None  # after the opening's end: its helper thread may have set it late
        for error in result.errors:
            log.error("%s", error)
        return json.loads(result.to_json())

    def on_kill(self) -> None:
        connect = self._connect
        if connect is None:
            super().on_kill()
            return
        url, tag = connect
        log.info("interrupting %s on the Spark Connect server (tag %s)", self.name, tag)
        # From a client of its own: on_kill runs in a signal handler, while the job's client
        # may be inside a call. Tags are per session, and the session is the same.
        with connect_session(url) as spark:
            spark.interruptTag(tag)

    def _spark_submit(self, context: Any, env: dict[str, str]) -> dict[str, Any]:
        """``spark-submit`` the job with ``env``; return its result (raise if it wrote none)."""
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
