"""``mirror_failover_consumer_group``: move consumer groups from one cluster to another (manual, with a form).

Tasks, each with its own log:

1. ``preflight``: checks the request against the topology and the clusters,
   resolves the group patterns, and refuses (changing nothing) when a group has
   members on the target, or on the source in planned mode unless ``force``.
2. ``publish_final`` (planned): the groups' final positions are published on
   the source and carried along the tree to every cluster.
3. ``wait_for_replication`` (planned): a deferrable sensor that waits until the
   target holds every message the groups consumed on the source.
4. ``switch``: resolves each position on the target (``exact`` or ``timestamp``),
   logs the per-partition table (source position, target position, expected
   replay), and commits; the groups' owner becomes the target, so
   ``mirror_offsets`` follows the groups there from its next run.
5. ``verify``: re-reads the target's committed offsets against the table.

Emergency mode (the source is gone) skips 2 and 3 and uses the last positions
that reached the target; the table says how old they are: whatever the group
consumed on the source after that is read again. Failback is the same DAG with
the clusters swapped. A dry run computes the same table and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from mirrorflow.audit import audit
from mirrorflow.copy.links import effective_links
from mirrorflow.errors import ClusterUnreachable
from mirrorflow.kafka.admin import probe
from mirrorflow.offsets.distribute import distribute
from mirrorflow.offsets.failover import (
    MODES,
    FailoverPlan,
    FailoverRefused,
    distributed_positions,
    match_groups,
    plan_failover,
    refuse_active,
    table,
    verify,
)
from mirrorflow.offsets.groups import describe_groups
from mirrorflow.offsets.sync import apply_commits, current_positions, publish_owned
from mirrorflow.offsets.topic import ensure_topic, read_positions
from mirrorflow.topology import Topology
from mirrorflow.topology.offsets import PRECISIONS
from mirrorflow_airflow.clusters import reachable_clients
from mirrorflow_airflow.defaults import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook
from mirrorflow_airflow.sensors.failover import GroupReplicatedSensor
from mirrorflow_airflow.state import group_owners, link_targets, set_group_owners

log = logging.getLogger(__name__)

DAG_ID = "mirror_failover_consumer_group"


def preflight(topology: Topology, params: dict[str, Any]) -> dict[str, Any]:
    """The checked request; raises :class:`FailoverRefused` (nothing changed) when it is unsafe or unclear."""
    source, target = params["from_cluster"], params["to_cluster"]
    mode, precision = params["mode"], params["precision"]
    topology.cluster(source)
    topology.cluster(target)
    if source == target:
        raise FailoverRefused(f"from_cluster and to_cluster are both {source}")
    if mode not in MODES:
        raise FailoverRefused(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if precision not in PRECISIONS:
        raise FailoverRefused(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    patterns = [params["groups"]] if isinstance(params["groups"], str) else list(params["groups"] or [])
    target_client = MirrorClusterHook(topology, target).client()
    source_client = MirrorClusterHook(topology, source).client()
    try:
        probe(target_client)
    except ClusterUnreachable as exc:
        raise FailoverRefused(f"the target {target} is unreachable: {exc.detail}") from exc
    try:
        probe(source_client)
        source_up = True
    except ClusterUnreachable as exc:
        source_up = False
        if mode == "planned":
            raise FailoverRefused(f"the source {source} is unreachable ({exc.detail}); a planned failover needs it. "
                                  f"Use mode emergency to fail over from the positions already distributed") from exc
    if mode == "planned":
        known = describe_groups(source_client, topology.offsets.selects)
        groups = match_groups(patterns, known)
        where = f"on {source}"
    else:
        known = {p.group for p in read_positions(target_client).values() if p.owner == source}
        groups = match_groups(patterns, known)
        where = f"in the positions from {source} that reached {target}"
        if source_up:
            log.warning("emergency mode but %s answers: a planned failover would use its latest commits", source)
    if not groups:
        raise FailoverRefused(f"no consumer group {where} matches {', '.join(map(repr, patterns))} "
                              f"(known: {', '.join(sorted(known)) or 'none'})")
    refuse_active(target_client, groups, "target")
    if mode == "planned":
        try:
            refuse_active(source_client, groups, "source")
        except FailoverRefused:
            if not params["force"]:
                raise
            log.warning("force: failing over groups that still have members on %s; what they consume from now on "
                        "is not covered and will be read again on %s", source, target)
    log.info("failover %s -> %s, mode %s, precision %s%s: groups %s", source, target, mode, precision,
             " [dry run]" if params["dry_run"] else "", ", ".join(groups))
    return {"groups": groups, "source": source, "target": target, "mode": mode, "precision": precision,
            "dry_run": bool(params["dry_run"]), "force": bool(params["force"])}


def publish_final(topology: Topology, plan: dict[str, Any]) -> dict[str, Any]:
    if plan["mode"] != "planned" or plan["dry_run"]:
        log.info("%s%s: positions are not republished", plan["mode"], " dry run" if plan["dry_run"] else "")
        return {"published": 0}
    clients, down = reachable_clients(topology)
    for client in clients.values():
        ensure_topic(client)
    positions = publish_owned(clients[plan["source"]], plan["groups"], topology.selects)
    targets = link_targets()
    report = distribute({lvl: effective_links(topology, lvl, targets) for lvl in topology.levels}, clients,
                        skip=down)
    log.info("published %d final positions on %s and distributed %d records", len(positions), plan["source"],
             report.copied)
    for link_id, error in sorted(report.errors.items()):
        log.warning("%s: %s (the wait below tells whether %s got what it needs)", link_id, error, plan["target"])
    return {"published": len(positions), "distributed": report.copied}


def switch(topology: Topology, plan: dict[str, Any]) -> dict[str, Any]:
    source, target, groups = plan["source"], plan["target"], plan["groups"]
    target_client = MirrorClusterHook(topology, target).client()
    if plan["mode"] == "planned" and plan["dry_run"]:
        source_client = MirrorClusterHook(topology, source).client()
        positions = current_positions(source_client, groups, topology.selects, read_positions(source_client))
    else:
        positions = distributed_positions(target_client, source, groups)
    if not positions:
        raise FailoverRefused(f"no positions of {', '.join(groups)} from {source} are available on {target}")
    margin = max(topology.offsets.precision_for(g)[1] for g in groups)
    result: FailoverPlan = plan_failover(target_client, positions, source=source, mode=plan["mode"],
                                         precision=plan["precision"], margin_s=margin, groups=groups)
    log.info("per-partition positions%s:\n%s", " [dry run: nothing changed]" if plan["dry_run"] else "",
             table(result))
    oldest = max((r.position_age_s for r in result.rows), default=0.0)
    if plan["mode"] == "emergency":
        log.warning("emergency: the positions used are up to %.0fs old; what the groups consumed on %s in the last "
                    "%.0fs before it failed is read again on %s", oldest, source, oldest, target)
    for name, origins in sorted(result.missing.items()):
        log.warning("%s: %s lacks the last consumed message of %s; those messages are read on %s when they arrive",
                    name, target, ", ".join(origins), target)
    summary = {"plan": result.to_dict(), "oldest_position_s": oldest, "dry_run": plan["dry_run"]}
    if plan["dry_run"]:
        return summary
    refuse_active(target_client, groups, "target")  # again, right before the commit
    apply_commits(target_client, result.commit_rows())
    owners = group_owners()
    owners.update({g: target for g in groups})
    set_group_owners(owners)
    audit("failover", groups=groups, source=source, target=target, mode=plan["mode"], precision=plan["precision"],
          force=plan["force"], oldest_position_s=oldest,
          partitions=[{"group": r.group, "topic": r.topic, "partition": r.partition, "source": r.source_offset,
                       "target": r.target_offset, "replay": r.expected_replay} for r in result.rows])
    return summary


def verify_switch(topology: Topology, summary: dict[str, Any]) -> dict[str, Any]:
    if summary["dry_run"]:
        log.info("dry run: nothing to verify")
        return {"verified": False}
    plan = summary["plan"]
    result = FailoverPlan.from_dict(plan)
    problems = verify(MirrorClusterHook(topology, plan["target"]).client(), result)
    if problems:
        raise AirflowException("the target's committed offsets differ from the plan:\n  " + "\n  ".join(problems))
    log.info("verified: %d partitions of %s committed on %s as planned; %s now runs there for mirror_offsets",
             len(result.rows), ", ".join(plan["groups"]), plan["target"], ", ".join(plan["groups"]))
    return {"verified": True, "partitions": len(result.rows)}


@contextmanager
def refusal_is_final() -> Iterator[None]:
    """A refusal changed nothing and would refuse again: fail the task without using its retries."""
    try:
        yield
    except FailoverRefused as exc:
        raise AirflowFailException(f"failover refused, nothing changed: {exc}") from exc


def build_failover_dag(topology: Topology) -> DAG:
    clusters = sorted(topology.clusters)
    with DAG(
        dag_id=DAG_ID,
        description="Move consumer groups to another cluster without skipping a message",
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args={**DEFAULT_ARGS, "retries": 1},
        tags=tags("operations", "offsets"),
        doc_md=__doc__,
        params={
            "groups": Param([], type="array", items={"type": "string"}, title="Consumer groups",
                            description="Group names or regexes (full match), one per line"),
            "from_cluster": Param(clusters[0], type="string", enum=clusters, title="From cluster"),
            "to_cluster": Param(clusters[-1], type="string", enum=clusters, title="To cluster"),
            "mode": Param("planned", type="string", enum=list(MODES), title="Mode",
                          description="planned: the source is up and the groups stopped there; "
                                      "emergency: the source is gone, use the positions already distributed"),
            "precision": Param(topology.offsets.default_precision, type="string", enum=list(PRECISIONS),
                               title="Precision",
                               description="exact: proven cut from provenance; timestamp: last consumed "
                                           "CreateTime minus the margin"),
            "dry_run": Param(False, type="boolean", title="Dry run", description="Show the table, change nothing"),
            "force": Param(False, type="boolean", title="Force",
                           description="Planned mode: go ahead although groups still have members on the source"),
        },
    ) as dag:

        @task
        def preflight_(params: dict | None = None) -> dict:
            """The request checked: groups resolved, refusals with the reason (a refusal is not retried)."""
            with refusal_is_final():
                return preflight(topology, params)

        @task
        def publish_final_(plan: dict) -> dict:
            """Planned: the final positions, published and carried to every cluster."""
            return publish_final(topology, plan)

        @task
        def switch_(plan: dict, published: dict) -> dict:
            """The per-partition table, and the commit on the target (a retry recomputes it: idempotent)."""
            with refusal_is_final():
                return switch(topology, plan)

        @task
        def verify_(summary: dict) -> dict:
            """The target's committed offsets re-read against the table."""
            return verify_switch(topology, summary)

        plan = preflight_.override(task_id="preflight")()
        published = publish_final_.override(task_id="publish_final")(plan)
        wait = GroupReplicatedSensor(task_id="wait_for_replication", plan=plan, poke_interval=15, timeout=1800)
        summary = switch_.override(task_id="switch")(plan, published)
        published >> wait >> summary
        verify_.override(task_id="verify")(summary)
    return dag
