"""``mirror_offsets``: keep consumer groups positioned on every cluster (scheduled, default every minute).

Each run, in four tasks:

1. ``owners``: find where each selected group runs (the one cluster where it
   has members; an idle group keeps its remembered owner, Variable
   ``mirrorflow_group_owners``). A group with members on two clusters at once
   is reported and left alone.
2. ``publish``: on each owner cluster, turn committed offsets into portable
   positions and write them to ``_mirrorflow.offsets``.
3. ``distribute``: carry that topic along the tree (same copier and copy flags as
   data, highest level first, so one pass reaches every cluster).
4. ``commit``: on every other cluster, resolve each position (``offsets.precision``
   per group pattern) and commit it for groups with no members there. Commits
   that would change nothing are not made; each made commit is one audit line.

A cluster that does not answer is skipped by every step, and the run ends
failed naming it, after the other clusters have been served.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowException

from mirrorflow.audit import audit
from mirrorflow.copy.links import effective_links
from mirrorflow.errors import MirrorflowError
from mirrorflow.offsets.distribute import distribute
from mirrorflow.offsets.groups import describe, describe_groups
from mirrorflow.offsets.sync import commit_positions, owners_from, publish_owned
from mirrorflow.offsets.topic import ensure_topic
from mirrorflow.topology import Topology
from mirrorflow.topology.replication import parse_schedule
from mirrorflow_airflow.clusters import reachable_clients
from mirrorflow_airflow.defaults import DEFAULT_ARGS, START_DATE, tags
from mirrorflow_airflow.state import group_owners, link_targets, set_group_owners

log = logging.getLogger(__name__)

DAG_ID = "mirror_offsets"


def find_owners(topology: Topology) -> dict[str, Any]:
    clients, down = reachable_clients(topology)
    infos = {}
    for name, client in clients.items():
        infos[name] = describe_groups(client, topology.offsets.selects)
    remembered = group_owners()
    owners, conflicts = owners_from(infos, remembered)
    for group, owner in sorted(owners.items()):
        if remembered.get(group) != owner:
            log.info("group %s runs on %s (was %s)", group, owner, remembered.get(group, "unknown"))
            audit("group_owner", group=group, owner=owner, previous=remembered.get(group))
    if owners != remembered:
        set_group_owners(owners)
    for group, clusters in conflicts.items():
        log.warning("group %s has members on %s at once: mirrorflow leaves it alone until it runs on one cluster",
                    group, ", ".join(clusters))
    unknown = sorted({g for per in infos.values() for g in per} - set(owners))
    if unknown:
        log.info("groups idle everywhere with no known owner (left alone): %s", ", ".join(unknown))
    return {"owners": {g: c for g, c in owners.items() if g not in conflicts}, "conflicts": conflicts,
            "unreachable": down}


def publish_positions(topology: Topology, owners: dict[str, str]) -> dict[str, Any]:
    clients, down = reachable_clients(topology)
    published: dict[str, int] = {}
    errors: dict[str, str] = {}
    for name, client in clients.items():
        mine = sorted(g for g, owner in owners.items() if owner == name)
        try:
            ensure_topic(client)
            published[name] = len(publish_owned(client, mine, topology.selects))
        except MirrorflowError as exc:  # one cluster's trouble must not stop the others' positions
            errors[f"publish on {name}"] = f"publishing positions of {', '.join(mine) or 'no groups'}: {exc}"
            log.error("%s: %s", name, errors[f"publish on {name}"])
            continue
        if mine:
            log.info("%s: published %d positions of %d groups (%s)", name, published[name], len(mine),
                     ", ".join(mine))
    for name in sorted(set(owners.values()) & set(down)):
        log.error("%s is unreachable: the positions of its groups are not refreshed this run", name)
    return {"published": published, "errors": errors, "unreachable": down}


def distribute_positions(topology: Topology) -> dict[str, Any]:
    clients, down = reachable_clients(topology)
    targets = link_targets()
    report = distribute({lvl: effective_links(topology, lvl, targets) for lvl in topology.levels}, clients,
                        skip=down)
    log.info("distributed %d position records (%d passed by the copy flags)", report.copied, report.skipped)
    for link_id, error in sorted(report.errors.items()):
        log.error("%s: %s", link_id, error)
    return {"copied": report.copied, "errors": report.errors, "unreachable": down}


def commit_everywhere(topology: Topology, owners: dict[str, str]) -> dict[str, Any]:
    clients, down = reachable_clients(topology)
    out: dict[str, Any] = {"committed": {}, "skipped": {}, "errors": {}, "unreachable": down}
    for name, client in clients.items():
        try:
            infos = describe(client, sorted(owners))
            report = commit_positions(client, owners, lambda g, i=infos: g not in i or not i[g].active,
                                      topology.offsets.precision_for)
        except MirrorflowError as exc:
            out["errors"][f"commit on {name}"] = str(exc)
            log.error("%s: %s", name, exc)
            continue
        for row in report.rows:
            log.info("%s: %s %s[%d] %s -> %d (%s, owner %s at %d; %s)", name, row.group, row.topic, row.partition,
                     "-" if row.before is None else row.before, row.after, row.precision, row.owner,
                     row.owner_offset, row.how)
        for group, why in sorted(report.skipped.items()):
            log.info("%s: group %s left alone: %s", name, group, why)
        out["committed"][name] = len(report.rows)
        out["skipped"][name] = report.skipped
    return out


def _fail_if_incomplete(*results: dict[str, Any]) -> None:
    down = {c: why for r in results for c, why in (r.get("unreachable") or {}).items()}
    errors = {k: v for r in results for k, v in (r.get("errors") or {}).items()}
    if down or errors:
        lines = [f"cluster {c} unreachable: {why}" for c, why in sorted(down.items())]
        lines += [f"{k}: {v}" for k, v in sorted(errors.items())]
        raise AirflowException("mirror_offsets served the other clusters, but:\n  " + "\n  ".join(lines))


def build_offsets_dag(topology: Topology) -> DAG:
    with DAG(
        dag_id=DAG_ID,
        description="Distribute committed consumer-group offsets and commit them on the other clusters",
        schedule=parse_schedule(topology.offsets.schedule),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        tags=tags("offsets"),
        doc_md=__doc__,
    ) as dag:

        @task
        def owners() -> dict:
            """Where each group runs."""
            return find_owners(topology)

        @task
        def publish(found: dict) -> dict:
            """Portable positions of each owner's groups, written to its _mirrorflow.offsets."""
            return publish_positions(topology, found["owners"])

        @task
        def distribute_(published: dict) -> dict:
            """_mirrorflow.offsets along the tree, exactly once."""
            return distribute_positions(topology)

        @task
        def commit(found: dict, published: dict, distributed: dict) -> dict:
            """Positions resolved and committed where the groups are idle; fails naming unreachable clusters."""
            result = commit_everywhere(topology, found["owners"])
            audit("offsets_run", owners=found["owners"], conflicts=found["conflicts"],
                  published=published["published"], distributed=distributed["copied"],
                  committed=result["committed"], unreachable=sorted(result["unreachable"]))
            _fail_if_incomplete(found, published, distributed, result)
            return result

        found = owners()
        published = publish(found)
        distributed = distribute_.override(task_id="distribute")(published)
        commit(found, published, distributed)
    return dag
