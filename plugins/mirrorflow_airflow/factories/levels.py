"""``mirror_level_<L>`` DAGs (contract): one per level of the topology.

Each run is one micro-batch of every level-L link (a source cluster's level-L
distributor and its effective target leaf):

- ``plan`` applies the operator's target switches (Airflow Variable
  ``mirrorflow_link_targets``) and the replication windows; it logs each link's
  effective target and, for a link outside its windows, when the next window
  opens. With no link open the run is skipped.
- ``copy`` submits the level job to Spark (``spark_jobs/mirror_level.py``): the
  driver shapes target topics, reads checkpoints and end offsets and packs the
  work; executors copy exactly once. It logs one audit line per partition and
  returns the batch summary, the DAG run's return value.

Schedule: ``replication.schedule`` or ``replication.levels.<L>.schedule`` of the
topology (default every 5 minutes); one run at a time, no catch-up.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowSkipException

from mirrorflow.audit import audit
from mirrorflow.copy.links import effective_links, split_by_window
from mirrorflow.topology import Topology
from mirrorflow_airflow.defaults import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.operators.level_copy import MirrorLevelCopyOperator
from mirrorflow_airflow.state import link_targets

log = logging.getLogger(__name__)


def level_dag_id(level: int) -> str:
    return f"mirror_level_{level}"


def plan_level(topology: Topology, level: int, run_id: str, now: datetime | None = None) -> dict:
    """Which level-``level`` links copy in this run and to which target (logged; returned for ``copy``)."""
    now = now or datetime.now(timezone.utc)
    targets = link_targets()
    links = effective_links(topology, level, targets)
    open_links, closed = split_by_window(topology, links, now)
    for link in links:
        switched = link.default_target != topology.link(link.link_id).default_target
        log.info("link %s: %s -> %s (level %d)%s", link.link_id, link.source, link.default_target, level,
                 " [switched by an operator; topology default " + topology.link(link.link_id).default_target + "]"
                 if switched else "")
    for c in closed:
        log.info("link %s: outside its replication window(s) %s; skipped this run; next window opens at %s",
                 c.link_id, ", ".join(c.windows), c.next_open.isoformat())
    audit("plan", run_id=run_id, level=level,
          links={l.link_id: {"source": l.source, "target": l.default_target} for l in open_links},
          closed={c.link_id: c.next_open.isoformat() for c in closed})
    if not open_links:
        first = min(c.next_open for c in closed)
        raise AirflowSkipException(f"every level-{level} link is outside its replication windows; "
                                   f"the next window opens at {first.isoformat()}")
    return {"level": level, "links": [l.link_id for l in open_links],
            "targets": {l.link_id: l.default_target for l in links}}


def build_level_dag(topology: Topology, level: int) -> DAG:
    links = topology.links(level)
    with DAG(
        dag_id=level_dag_id(level),
        description=f"One micro-batch of every level-{level} link ({len(links)} links)",
        schedule=topology.replication.schedule_for(level),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=tags("replication", f"level-{level}"),
        doc_md=__doc__,
    ) as dag:

        @task
        def plan(run_id: str | None = None) -> dict:
            """Effective targets and replication windows of this level's links."""
            return plan_level(topology, level, run_id or "")

        plan() >> MirrorLevelCopyOperator(task_id="copy", topology=topology, level=level)
    return dag


def build_level_dags(topology: Topology) -> dict[str, DAG]:
    return {level_dag_id(level): build_level_dag(topology, level) for level in topology.levels}
