"""The steps of ``mirror_offsets``: find each group's owner, publish its positions, distribute, commit.

Each step serves every cluster that answers and records the ones that did
not; only the last step fails, after the others were served, naming them.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk.exceptions import AirflowException

from mirrorflow.errors import MirrorflowError
from mirrorflow.journal import journal_entry
from mirrorflow.offsets.distribute import distribute
from mirrorflow.offsets.groups import describe, describe_groups
from mirrorflow.offsets.sync import commit_positions, owners_from, publish_owned
from mirrorflow.offsets.topic import ensure_topic
from mirrorflow.topology import Topology, effective_links
from mirrorflow_airflow.hooks.cluster import reachable_clients
from mirrorflow_airflow.names import hold_names
from mirrorflow_airflow.state import group_owners, link_targets, set_group_owners

log = logging.getLogger(__name__)


def find_owners(topology: Topology) -> dict[str, Any]:
    """Where each selected group runs: the one cluster with members, else its remembered owner.

    A group with members on two clusters at once is left out: either side's
    offsets could be the truth, and guessing would move a live consumer.
    Refused first when a live cluster's names changed (:mod:`mirrorflow_airflow.names`).
    """
    hold_names(topology, list(topology.clusters), "no position was published or committed")
    clients, down = reachable_clients(topology)
    infos = {}
    for name, client in clients.items():
        infos[name] = describe_groups(client, topology.offsets.selects)
    remembered = group_owners(topology.namespace)
    owners, conflicts = owners_from(infos, remembered)
    for group, owner in sorted(owners.items()):
        if remembered.get(group) != owner:
            log.info("group %s runs on %s (was %s)", group, owner, remembered.get(group, "unknown"))
            journal_entry("group_owner", group=group, owner=owner, previous=remembered.get(group))
    if owners != remembered:
        set_group_owners(topology.namespace, owners)
    for group, clusters in conflicts.items():
        log.warning("group %s has members on %s at once: mirrorflow leaves it alone until it runs on one cluster",
                    group, ", ".join(clusters))
    unknown = sorted({g for per in infos.values() for g in per} - set(owners))
    if unknown:
        log.info("groups idle everywhere with no known owner (left alone): %s", ", ".join(unknown))
    return {"owners": {g: c for g, c in owners.items() if g not in conflicts}, "conflicts": conflicts,
            "unreachable": down}


def publish_positions(topology: Topology, owners: dict[str, str]) -> dict[str, Any]:
    """On each owner cluster, its groups' committed offsets as portable positions in ``_mirrorflow.offsets``."""
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
    """``_mirrorflow.offsets`` carried along the tree like data, so one pass reaches every cluster."""
    clients, down = reachable_clients(topology)
    targets = link_targets(topology.namespace)
    report = distribute({lvl: effective_links(topology, lvl, targets) for lvl in topology.levels}, clients,
                        skip=down)
    log.info("distributed %d position records (%d passed by the copy flags)", report.copied, report.skipped)
    for link_id, error in sorted(report.errors.items()):
        log.error("%s: %s", link_id, error)
    return {"copied": report.copied, "errors": report.errors, "unreachable": down}


def commit_everywhere(topology: Topology, owners: dict[str, str]) -> dict[str, Any]:
    """On every cluster, each position resolved and committed for groups with no members there."""
    clients, down = reachable_clients(topology)
    out: dict[str, Any] = {"committed": {}, "skipped": {}, "errors": {}, "unreachable": down}
    for name, client in clients.items():
        try:
            infos = describe(client, sorted(owners))
            report = commit_positions(client, owners, lambda g: g not in infos or not infos[g].active,
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


def fail_if_incomplete(*results: dict[str, Any]) -> None:
    """Fail (retryable) naming every unreachable cluster and error of the run's steps, if there were any."""
    down = {c: why for r in results for c, why in (r.get("unreachable") or {}).items()}
    errors = {k: v for r in results for k, v in (r.get("errors") or {}).items()}
    if down or errors:
        lines = [f"cluster {c} unreachable: {why}" for c, why in sorted(down.items())]
        lines += [f"{k}: {v}" for k, v in sorted(errors.items())]
        raise AirflowException("mirror_offsets served the other clusters, but:\n  " + "\n  ".join(lines))


def unchanged_owners(ns: str, found: dict[str, str]) -> dict[str, str]:
    """The groups of ``found`` whose owner is still the recorded one now, at commit time.

    A failover records a group's new owner and commits its offsets there while
    this run is between its steps; positions this run took from the old owner
    must not be committed over the failover's. Such a group is left to the next
    run, which starts from the new owner. (The commit runs in the operations
    pool, so no failover writes between this read and the commits.)
    """
    current = group_owners(ns)
    moved = {g: (owner, current.get(g)) for g, owner in found.items() if current.get(g, owner) != owner}
    for group, (before, now) in sorted(moved.items()):
        log.warning("group %s: its owner changed from %s to %s during this run (a failover): its offsets are "
                    "left for the next run", group, before, now)
        journal_entry("offsets_owner_moved", group=group, owner=before, now=now)
    return {g: owner for g, owner in found.items() if g not in moved}


def commit_run(topology: Topology, found: dict[str, Any], published: dict[str, Any],
               distributed: dict[str, Any]) -> dict[str, Any]:
    """The commits everywhere, one journal line for the run, then a failure naming whatever was skipped.

    Failing last means one unreachable cluster delays nobody: the others got
    their positions in this very run.
    """
    owners = unchanged_owners(topology.namespace, found["owners"])
    result = commit_everywhere(topology, owners)
    journal_entry("offsets_run", owners=owners, conflicts=found["conflicts"],
                  published=published["published"], distributed=distributed["copied"],
                  committed=result["committed"], unreachable=sorted(result["unreachable"]))
    fail_if_incomplete(found, published, distributed, result)
    return result
