"""A level run's plan: the steps of planning, called in order, for every link of the spec.

Planning is admin round trips, not work. Every cluster is probed once; the
targets are then shaped one link after another in the spec's order, since
shaping writes and a link's target is another link's source, whose partitions
that link reads; the rest of each link's plan, reads only, runs for every link
side by side. A link whose clusters fail is reported and the other links are
still planned. Every question goes through one admin client per cluster
(:mod:`mirrorflow.kafka.shared`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from mirrorflow.copy.plan.acls import AclSync
from mirrorflow.copy.plan.clusters import closed_clusters, refuse_closed
from mirrorflow.copy.plan.configs import ConfigOwners, config_owners
from mirrorflow.copy.plan.link import LinkPlan, plan_link
from mirrorflow.copy.plan.shapes import Shaped, shape_target
from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow.errors import ClusterUnreachable, MirrorflowError
from mirrorflow.kafka import sharing_admins
from mirrorflow.topology.model import TopicSelector

#: Links planned side by side at the most.
PLAN_THREADS = 8


def plan(spec: JobSpec, slots: int | Callable[[], int]) -> list[LinkPlan]:
    """Plan every link of the spec; the plans come back in the spec's order of links."""
    with sharing_admins():
        selector = TopicSelector(spec.topics)
        closed = closed_clusters(spec)
        owners = config_owners(spec, closed)
        acls = AclSync(spec, closed)
        shaped = [_shape(spec, link, selector, closed, owners, acls) for link in spec.links]
        plans = _plan_links(spec, selector, shaped, slots)
        acls.tell(p.report for p in plans)
        return plans


def _shape(spec: JobSpec, link: LinkJob, selector: TopicSelector, closed: Mapping[str, ClusterUnreachable],
           owners: ConfigOwners | None, acls: AclSync) -> Shaped | LinkPlan:
    """A link's writes, before its reads: its target's topics shaped, and the target's ACLs synced."""
    started = time.monotonic()
    try:
        refuse_closed(link, closed)
        shape = shape_target(spec, link, selector, owners)
        acls.sync(link.target)
    except MirrorflowError as exc:
        return LinkPlan.failed(link, exc)
    return Shaped(shape, time.monotonic() - started)


def _plan_links(spec: JobSpec, selector: TopicSelector, shaped: list[Shaped | LinkPlan],
                slots: int | Callable[[], int]) -> list[LinkPlan]:
    """Each shaped link's plan, side by side (a link that failed already keeps its failure)."""
    retention: dict[str, tuple[float, str | None]] = {}  # read once per target cluster

    def plan_one(item: tuple[LinkJob, Shaped | LinkPlan]) -> LinkPlan:
        link, shape = item
        if isinstance(shape, LinkPlan):
            return shape
        try:
            return plan_link(spec, link, selector, slots, shape, retention)
        except MirrorflowError as exc:
            return LinkPlan.failed(link, exc)

    with ThreadPoolExecutor(max_workers=max(1, min(PLAN_THREADS, len(spec.links))), thread_name_prefix="plan") as pool:
        return list(pool.map(plan_one, zip(spec.links, shaped, strict=True)))
