"""The one task of ``mirror_level_<L>``: pick the run's links, submit the level job to Spark, read its result, report.

A thin layer over the Spark provider's ``SparkSubmitOperator``: the Airflow Spark
connection (``spark_default``) says where the job runs, so the same job runs on
``local[*]``, on a Spark cluster and, with a ``spark_connect`` connection, on a
Spark Connect server that stays up between runs (no Spark start per micro-batch;
see ``MirrorSparkJobOperator``). What this operator adds:

- it picks the run's links at run time (:func:`plan_level`: the operator's target
  switches and the replication windows apply from the next run, without a restart;
  with every link outside its windows the run is skipped, saying when the next
  opens). Planning here rather than in a task of its own saves a task start per
  run (docs/benchmarks.md);
- it builds the job spec from the topology, those links and each cluster's client settings resolved from Airflow
  connections (and, for links with ``on_gap: restore``, the archive's location from
  its AWS connection). The spec (credentials included) goes to ``spark-submit`` in the
  ``MIRRORFLOW_JOB`` environment variable only: never in the command line, the
  rendered template fields or the task log;
- the driver writes its result to a private temporary file; this operator logs
  the per-link summary, returns it (the DAG run's return value) and fails the
  task with every failing link, topic, partition, offset and error named, after
  the other partitions have been copied;
- each target cluster and topic that got records is one asset event
  (``kafka://<bootstrap>/<topic>``, through the alias ``mirrorflow.arrivals``;
  docs/assets.md), registered when the task succeeds. When a partition failed, the
  task fails (red) and hands every arrival to ``announce``, which runs after a failure
  too: Airflow drops a failed task's outlet events, and the topics that advanced must
  not wait for the sick partition. Such a failure is not retried within the run (a
  retry would start by clearing the XCom that holds those arrivals, and a gap, a size
  limit or a missing leader does not heal in 30 s): the next run is the retry, and
  for ``on_data`` levels the watcher paces it (docs/levels.md);
- with OpenLineage configured, the task's events carry every link's source topics
  as inputs and target topics as outputs (docs/lineage.md).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from mirrorflow.assets import arrivals
from mirrorflow.copy import JobSpec, build_spec, heals_from_archive, run_job, spec_clusters
from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_entry
from mirrorflow.lag.backoff import Failing, failing_keys
from mirrorflow.lineage import copy_lineage, level_edges
from mirrorflow.topology import Distributor, Topology, effective_links, split_by_window
from mirrorflow_airflow.assets import ANNOUNCE_TASK, ARRIVALS, emit_arrivals, finish_with_arrivals
from mirrorflow_airflow.hooks.archive import archive_location
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.names import hold_names
from mirrorflow_airflow.operators.spark_job import MirrorSparkJobOperator
from mirrorflow_airflow.spark import JOB_SCRIPT
from mirrorflow_airflow.state import (
    COPY_TOTALS_PREFIX,
    FAILING_PREFIX,
    link_targets,
    record_copy_totals,
    record_failing,
)

log = logging.getLogger(__name__)


def plan_level(topology: Topology, level: int, run_id: str, now: datetime | None = None) -> list[Distributor]:
    """The level-``level`` links that copy in this run, at their effective targets (logged and audited).

    Raises ``AirflowSkipException`` when every link is outside its replication windows.
    """
    now = now or datetime.now(UTC)
    links = effective_links(topology, level, link_targets(topology.namespace))
    open_links, closed = split_by_window(topology, links, now)
    for link in links:
        switched = link.default_target != topology.link(link.link_id).default_target
        log.info("link %s: %s -> %s (level %d)%s", link.link_id, link.source, link.default_target, level,
                 " [switched by an operator; topology default " + topology.link(link.link_id).default_target + "]"
                 if switched else "")
    for c in closed:
        log.info("link %s: outside its replication window(s) %s; skipped this run; next window opens at %s",
                 c.link_id, ", ".join(c.windows), c.next_open.isoformat())
    journal_entry("plan", run_id=run_id, level=level,
                  links={l.link_id: {"source": l.source, "target": l.default_target} for l in open_links},
                  closed={c.link_id: c.next_open.isoformat() for c in closed})
    if not open_links:
        first = min(c.next_open for c in closed)
        raise AirflowSkipException(f"every level-{level} link is outside its replication windows; "
                                   f"the next window opens at {first.isoformat()}")
    return open_links


class CopyFailed(MirrorflowError, AirflowFailException):
    """Some links or partitions of a level run failed; the others were copied. Failed without a retry (above)."""


class MirrorLevelCopyOperator(MirrorSparkJobOperator[JobSpec]):
    """Submit one micro-batch of a level to Spark and report its result."""

    def __init__(self, *, topology: Topology, level: int, spark_conn_id: str = "spark_default",
                 **kwargs: Any) -> None:
        super().__init__(application=str(JOB_SCRIPT), spark_conn_id=spark_conn_id, name=f"mirrorflow-level-{level}",
                         run=run_job, plans_while_opening=True, outlets=[ARRIVALS], **kwargs)
        self.topology = topology
        self.level = level

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the result is the XCom
        links = plan_level(self.topology, self.level, context["run_id"])
        touched = spec_clusters(self.topology, links)
        hold_names(self.topology, touched, "nothing was copied")
        clusters = {c: dict(MirrorClusterHook(self.topology, c).client().settings) for c in touched}
        archive = archive_location(self.topology).to_dict() if heals_from_archive(self.topology, links) else None
        spec = build_spec(self.topology, self.level, context["run_id"], links, clusters, archive=archive)

        result = self.submit(context, spec)
        partitions = result.pop("partitions", None) or []
        self._record_totals(partitions, result, context["run_id"])
        self._record_failing(result, context["run_id"])
        bootstraps = {c: s["bootstrap.servers"] for c, s in clusters.items()}
        self.lineage = copy_lineage(level_edges(result["links"]), bootstraps, partitions,
                                    archive=(archive["bucket"], archive["prefix"]) if archive else None,
                                    names=spec.namings())
        # a failing task's events are dropped: then every arrival goes to ``announce`` (known=nothing)
        result["arrived"], held = emit_arrivals(context["outlet_events"], arrivals(
            partitions, bootstraps, run_id=context["run_id"], names=spec.namings()),
            known=None if result["ok"] else frozenset())
        for link in result["links"]:
            log.info("link %s: %s -> %s: %d copied, %d skipped, %d bytes over %d partitions%s", link["link"],
                     link["source"], link["target"], link["copied"], link["skipped"], link["bytes"],
                     link["partitions"], f"; ERROR {link['error']}" if link.get("error") else "")
            for topic, keys in sorted((link.get("configs_aligned") or {}).items()):
                log.info("link %s: %s on %s now follows its config owner: %s", link["link"], topic, link["target"],
                         ", ".join(keys))
            for problem in link.get("config_problems") or []:
                log.warning("link %s: topic configs on %s: %s", link["link"], link["target"], problem)
            for made, what in (("acls_created", "created"), ("acls_deleted", "deleted")):
                for acl in link.get(made) or []:
                    log.info("link %s: ACL %s on %s as on its owner: %s", link["link"], what, link["target"], acl)
            for problem in link.get("acl_problems") or []:
                log.warning("link %s: ACL sync on %s: %s", link["link"], link["target"], problem)
            for declined in link.get("declined") or []:  # every run, not once: it is still not done
                log.warning("link %s: DECLINED %s", link["link"], declined["message"])
        if not result["ok"]:
            result["announce"] = held
            context["ti"].xcom_push(key="return_value", value=result)
            lines = "\n  ".join(result["errors"])
            announced = (f"; {len(held)} arrival event(s) of what advanced are announced by {ANNOUNCE_TASK!r}"
                         if held else "")
            raise CopyFailed(f"level {self.level} run {context['run_id']}: {len(result['errors'])} failure(s); "
                             f"every other partition was copied{announced}; not retried in this run, the next "
                             f"run is the retry:\n  {lines}")
        return finish_with_arrivals(context, result, held)

    def _record_failing(self, result: dict[str, Any], run_id: str) -> None:
        """Tell the ``on_data`` watcher what this run failed, so it backs off from those alone (docs/levels.md)."""
        try:
            at = result.get('finished_at') or time.time()
            record_failing(self.topology.namespace, self.level, Failing(f"{run_id}@{at}",
                                               failing_keys(result.get("error_details") or [])))
        except Exception as exc:  # the copy stands; the watcher only learns of the failure one run later
            log.error("level %d run %s: what failed was not recorded for the on_data watcher (Variable %s%d): "
                      "%s: %s", self.level, run_id, FAILING_PREFIX, self.level, type(exc).__name__, exc)

    def _record_totals(self, partitions: list[dict[str, Any]], result: dict[str, Any], run_id: str) -> None:
        """Keep the running totals the status page and the metrics read; the copy stands even if this fails."""
        try:
            record_copy_totals(self.topology.namespace, self.level, partitions,
                               finished_at=result.get("finished_at") or time.time(),
                               run_id=run_id)
        except Exception as exc:  # the messages are copied and committed: only the counters are behind
            log.error("level %d run %s: the copy totals (Variable %s%d) were not updated, so the status page and "
                      "the metrics lag behind this run: %s: %s", self.level, run_id, COPY_TOTALS_PREFIX, self.level,
                      type(exc).__name__, exc)
