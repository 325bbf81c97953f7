"""Which clusters of a plan let this client in: each probed once, before anything is planned.

A wrong password or a cluster that is down then fails the links that need it at
once, saying which and why, instead of timing out somewhere inside planning (once
per request); the other links are planned.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mirrorflow.copy.spec import JobSpec, LinkJob
from mirrorflow.errors import ClusterUnreachable
from mirrorflow.kafka import ClusterClient, probe

log = logging.getLogger(__name__)


def closed_clusters(spec: JobSpec) -> dict[str, ClusterUnreachable]:
    """The clusters of the spec's links, and the owners of its configs and ACLs, that do not let this client in:
    down, or refusing its login.

    One after another: probing side by side once crashed a test process (SIGABRT
    inside librdkafka, on CI, not reproduced), and a probe of a cluster that answers is quick.
    """
    closed: dict[str, ClusterUnreachable] = {}
    ownership, grants = spec.config_ownership(), spec.grant_rules()
    owners = {*(ownership.clusters() if ownership is not None else ()), *((grants.owner,) if grants and grants.sync
                                                                          else ())}
    for name in sorted({c for link in spec.links for c in (link.source, link.target)}
                       | {c for c in owners if c in spec.clusters}):
        try:
            probe(ClusterClient(name, spec.clusters[name]), timeout=10.0)
        except ClusterUnreachable as exc:  # ClusterLoginFailed included
            closed[name] = exc
            log.error("%s", exc)
    return closed


def refuse_closed(link: LinkJob, closed: Mapping[str, ClusterUnreachable]) -> None:
    """Raise why the link cannot be planned when its source or its target is closed (the source's first)."""
    for name in (link.source, link.target):
        if name in closed:
            raise closed[name]
