"""``mirror_switch_target``: move one link to another leaf of its sibling subtree (manual, with a form).

The Axual operator action for a target leaf that is unavailable or being
decommissioned. The form offers the topology's clusters and levels as
drop-downs; the task checks the choice against the tree, cuts the link over
exactly (see :mod:`mirrorflow.copy.switch`), and records the new effective
target in the Airflow Variable the level DAGs read at every run: no file edit,
no restart. A dry run shows the cut without changing anything.
"""

from __future__ import annotations

import logging

from airflow.sdk import DAG, Param, task

from mirrorflow.audit import audit
from mirrorflow.copy.links import effective_links
from mirrorflow.copy.switch import SwitchError, switch_target
from mirrorflow.topology import Topology
from mirrorflow_airflow.defaults import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.state import link_targets, set_link_target

log = logging.getLogger(__name__)

DAG_ID = "mirror_switch_target"


def run_switch(topology: Topology, source_cluster: str, level: int, target: str, *, dry_run: bool = False,
               force: bool = False) -> dict:
    """What the DAG's task does; a plain function so it reads top to bottom."""
    topology.cluster(source_cluster)
    topology.cluster(target)
    candidates = [l for l in effective_links(topology, int(level), link_targets()) if l.source == source_cluster]
    if not candidates:
        raise SwitchError(f"{source_cluster} runs no level-{level} distributor (its levels: "
                          f"{', '.join(str(d.level) for d in topology.distributors(source_cluster))})")
    link = next((l for l in candidates if l.accepts(target)), None)
    if link is None:
        allowed = sorted({t for l in candidates for t in l.sibling_leaves})
        raise SwitchError(f"{target} is not in a level-{level} sibling subtree of {source_cluster}; allowed "
                          f"targets: {', '.join(allowed)}")
    log.info("link %s: current target %s, requested %s (allowed: %s)%s", link.link_id, link.default_target, target,
             ", ".join(link.sibling_leaves), " [dry run]" if dry_run else "")
    clients = {c: MirrorClusterHook(topology, c).client() for c in {link.source, link.default_target, target}}
    report = switch_target(link, target, clients, list(topology.topics), dry_run=dry_run, force=force)
    for topic, cuts in report.cuts.items():
        for partition, cut in cuts.items():
            log.info("%-40s %5d  %s starts at source offset %s", topic, partition, target,
                     "the beginning" if cut is None else cut)
    for warning in report.warnings:
        log.warning("%s", warning)
    if not dry_run and report.mode != "noop":
        targets = set_link_target(link.link_id, target, topology.link(link.link_id).default_target)
        audit("link_target", link=link.link_id, target=target, targets=targets)
        log.info("link %s now copies to %s from the next mirror_level_%d run", link.link_id, target, link.level)
    return report.to_dict()


def build_switch_dag(topology: Topology) -> DAG:
    clusters = sorted(topology.clusters)
    levels = topology.levels
    with DAG(
        dag_id=DAG_ID,
        description="Switch a link's target to another leaf of the same subtree (no gap, no duplicate)",
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args={**DEFAULT_ARGS, "retries": 1},
        tags=tags("operations"),
        doc_md=__doc__,
        params={
            "source_cluster": Param(clusters[0], type="string", enum=clusters, title="Source cluster",
                                    description="The cluster whose distributor is switched"),
            "level": Param(levels[-1], type="integer", enum=levels, title="Level",
                           description="The distributor's level"),
            "target": Param(clusters[-1], type="string", enum=clusters, title="New target",
                            description="A leaf of the level's sibling subtree of the source"),
            "dry_run": Param(False, type="boolean", title="Dry run", description="Show the cut, change nothing"),
            "force": Param(False, type="boolean", title="Force",
                           description="Switch even if the current target is unreachable (cut from provenance)"),
        },
    ) as dag:

        @task
        def switch(params: dict | None = None) -> dict:
            """Cut the link over to the new target and record it."""
            p = params or {}
            return run_switch(topology, p["source_cluster"], int(p["level"]), p["target"],
                              dry_run=bool(p.get("dry_run")), force=bool(p.get("force")))

        switch()
    return dag
