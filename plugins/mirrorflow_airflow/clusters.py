"""Every cluster of the topology as a client, with the unreachable ones set aside (named, with why).

DAGs that visit every cluster (offsets, lag, failover) must keep going when
one cluster is down, and say which one; this is the one place that decides.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mirrorflow.errors import ClusterUnreachable, MirrorflowError
from mirrorflow.kafka.admin import probe
from mirrorflow.kafka.config import ClusterClient
from mirrorflow.topology import Topology
from mirrorflow_airflow.hooks.cluster import MirrorClusterHook

log = logging.getLogger(__name__)


def reachable_clients(topology: Topology, names: Iterable[str] | None = None, timeout: float = 10.0
                      ) -> tuple[dict[str, ClusterClient], dict[str, str]]:
    """(clients that answered a probe, cluster -> reason for the others)."""
    ok: dict[str, ClusterClient] = {}
    down: dict[str, str] = {}
    for name in sorted(names if names is not None else topology.clusters):
        try:
            client = MirrorClusterHook(topology, name).client()
            probe(client, timeout=timeout)
            ok[name] = client
        except ClusterUnreachable as exc:
            down[name] = exc.detail
            log.error("cluster %s (%s) is unreachable: %s", name, exc.bootstrap, exc.detail)
        except MirrorflowError as exc:
            down[name] = str(exc)
            log.error("cluster %s: %s", name, exc)
    return ok, down
