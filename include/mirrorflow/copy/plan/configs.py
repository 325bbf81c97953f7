"""Syncing topic configs: the owners of the targets' travelling configs (``topic_configs``), one plan's worth.

Made once per plan and shared by every link's shaping (:mod:`~mirrorflow.copy.plan.shapes`
hands them on), so that each owner's configs, and each target's records of what the
sync last saw, are read once per run however many links share a target.
"""

from __future__ import annotations

from collections.abc import Mapping

from mirrorflow.cluster_sync import ConfigOwners
from mirrorflow.copy.spec import JobSpec
from mirrorflow.errors import ClusterUnreachable


def config_owners(spec: JobSpec, closed: Mapping[str, ClusterUnreachable] | None = None,
                  timeout: float = 30.0) -> ConfigOwners | None:
    """The owners of the spec's topic configs (``spec.topic_configs``), one plan's worth; ``None``: no owner.

    ``closed``: clusters found down or refusing this client, whose configs are not read in this run.
    """
    ownership = spec.config_ownership()
    if ownership is None:
        return None
    closed = closed or {}
    return ConfigOwners(ownership, {c: spec.client(c) for c in ownership.clusters() if c in spec.clusters}, timeout,
                        unread={c: str(e) for c, e in closed.items() if c in ownership.clusters()})
