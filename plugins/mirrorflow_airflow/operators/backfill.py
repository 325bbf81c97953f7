"""The backfill step of ``mirror_onboard_cluster``: submit the backfill job to Spark and report it.

The plan comes from the ``preflight`` task (XCom); both clusters' client
settings come from the cluster hook, on the topology as the plan grows it (the
new cluster joins only later). The job spec, with those settings and, for
``archive``, the archive's credentials, goes to ``spark-submit`` in
``MIRRORFLOW_BACKFILL`` only. With OpenLineage configured, its events name the
source topics (and the archive, for what it restored) as inputs and the new cluster's
topics as outputs (docs/lineage.md).
"""

from __future__ import annotations

import logging
from typing import Any

from mirrorflow.assets import arrivals
from mirrorflow.errors import MirrorflowError
from mirrorflow.lineage import Edge, copy_lineage
from mirrorflow.onboard.backfill import BackfillSpec, run_backfill
from mirrorflow.onboard.plan import OnboardPlan
from mirrorflow.topology import Topology
from mirrorflow_airflow.assets import ARRIVALS, emit_arrivals, finish_with_arrivals
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.operators.spark_job import MirrorSparkJobOperator
from mirrorflow_airflow.spark import SPARK_JOBS

log = logging.getLogger(__name__)


class BackfillFailed(MirrorflowError):
    """Some partitions did not reach the cut; re-running continues from their checkpoints."""


class MirrorBackfillOperator(MirrorSparkJobOperator[BackfillSpec]):
    def __init__(self, *, topology: Topology, plan_task_id: str = "preflight", **kwargs: Any) -> None:
        super().__init__(application=str(SPARK_JOBS / "mirror_backfill.py"), name="mirrorflow-backfill",
                         run=run_backfill, outlets=[ARRIVALS], **kwargs)
        self.topology = topology
        self.plan_task_id = plan_task_id

    def execute(self, context: Any) -> dict[str, Any]:  # type: ignore[override]  # the result is the XCom
        plan = OnboardPlan.from_dict(context["ti"].xcom_pull(task_ids=self.plan_task_id))
        if plan.dry_run:
            log.info("dry run: would backfill %d topics from %s to %s (%s), link %s", len(plan.topics),
                     plan.sibling_of, plan.cluster, plan.backfill, plan.link_id)
            return {"dry_run": True}
        grown = plan.grown(self.topology)
        clients = {name: MirrorClusterHook(grown, name).client() for name in (plan.sibling_of, plan.cluster)}
        location = None
        if plan.restore:
            from mirrorflow_airflow.hooks.archive import archive_location

            location = archive_location(self.topology).to_dict()
        spec = BackfillSpec(
            run_id=context["run_id"], link_id=plan.link_id, level=plan.level, source=plan.sibling_of,
            target=plan.cluster, mode=plan.backfill, bits=plan.bits, topics=plan.topics,
            clusters={name: dict(c.settings) for name, c in clients.items()}, since_ms=plan.since_ms,
            restore=plan.restore, location=location, copy_threads=self.topology.replication.copy_threads,
            names=plan.grown(self.topology).topic_formats([plan.sibling_of, plan.cluster]),
            namespace=self.topology.namespace,
            # The new link's commit interval, as its level runs will use it: the link is not in the topology
            # until the join, so its settings come from replication (links.<id>, else the defaults).
            **({"txn_records": txn} if (txn := self.topology.replication.link_settings(plan.link_id).txn_records)
               else {}),
        )
        result = self.submit(context, spec)
        partitions = result.pop("partition_results", [])
        for p in partitions:
            log.info("%s[%d]: source %d..%d, %d copied (%d from the archive)%s", p["topic"], p["partition"],
                     p["start_offset"], p["next_offset"], p["copied"], p.get("restored", 0),
                     f"; ERROR {p['error']}" if p["error"] else "")
        bootstraps = {name: str(c.settings["bootstrap.servers"]) for name, c in clients.items()}
        self.lineage = copy_lineage([Edge(plan.link_id, plan.sibling_of, plan.cluster, t) for t in sorted(plan.topics)],
                                    bootstraps, partitions,
                                    archive=(location["bucket"], location["prefix"]) if location else None,
                                    names=spec.namings())
        result["arrived"], held = emit_arrivals(context["outlet_events"], arrivals(
            partitions, bootstraps, run_id=context["run_id"], by="backfill", names=spec.namings()))
        if not result["ok"]:
            raise BackfillFailed(f"backfill of {plan.cluster} from {plan.sibling_of}: {len(result['errors'])} "
                                 "partition(s) failed; the others reached the cut; re-run to continue:\n  "
                                 + "\n  ".join(result["errors"]))
        return finish_with_arrivals(context, result, held)
