"""``mirror_level_<L>`` DAGs (contract): one per level of the topology.

Each run handles every level-L link (a source cluster's level-L distributor and
its target leaf). This revision plans only: it checks both ends answer and logs,
per link, what the source holds for the selected topics. The copy job is added
on top of this plan by the copy-engine work.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from airflow.sdk import DAG, task

from mirrorflow.audit import audit
from mirrorflow.inventory import selected_partitions, summarize
from mirrorflow.kafka import admin
from mirrorflow.topology import Topology
from mirrorflow_airflow.defaults import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook

log = logging.getLogger(__name__)

DEFAULT_SCHEDULE = timedelta(minutes=5)


def level_dag_id(level: int) -> str:
    return f"mirror_level_{level}"


def build_level_dag(topology: Topology, level: int) -> DAG:
    links = topology.links(level)
    with DAG(
        dag_id=level_dag_id(level),
        description=f"One micro-batch of every level-{level} link ({len(links)} links)",
        schedule=DEFAULT_SCHEDULE,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=tags("replication", f"level-{level}"),
        doc_md=__doc__,
    ) as dag:

        @task
        def plan_links() -> dict:
            """Probe both ends of each link and record what its source holds."""
            plans = []
            for link in links:
                source = MirrorClusterHook(topology, link.source).client()
                target = MirrorClusterHook(topology, link.default_target).client()
                source_info = admin.probe(source)
                target_info = admin.probe(target)
                summary = summarize(selected_partitions(source, topology))
                record = audit(
                    "plan",
                    level=level,
                    link=link.link_id,
                    source=link.source,
                    source_cluster_id=source_info.cluster_id,
                    target=link.default_target,
                    target_cluster_id=target_info.cluster_id,
                    topics=summary["topics"],
                    partitions=summary["partitions"],
                    offsets_available=summary["offsets_available"],
                )
                plans.append(record)
            return {"level": level, "links": len(plans), "plans": plans}

        plan_links()
    return dag


def build_level_dags(topology: Topology) -> dict[str, DAG]:
    return {level_dag_id(level): build_level_dag(topology, level) for level in topology.levels}
