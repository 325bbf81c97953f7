"""The step of ``mirror_schemas``: one target cluster's registry synced from the primary.

One step per target keeps each target's log and retries its own. A conflict
is final (a retry would meet it again) and is raised only after every other
subject was written; an unreachable cluster or registry is retried.
"""

from __future__ import annotations

import logging
from typing import Any

from mirrorflow.topology import Topology
from mirrorflow_airflow.hooks.registry import sync_from_primary

log = logging.getLogger(__name__)


def sync_target(topology: Topology, target: str, dry_run: bool) -> dict[str, Any]:
    """What each ``sync_<target>`` task does: the target's registry synced from the primary's.

    The sync itself is :func:`~mirrorflow_airflow.hooks.registry.sync_from_primary`,
    which onboarding runs for a new cluster too.
    """
    return sync_from_primary(topology, target, dry_run)


def report_disabled() -> str:
    """Say why nothing is synced, so a DAG without work still shows a reason in its log."""
    log.info("the topology has no schemas.primary: there is no registry to sync from")
    return "disabled"
