"""Which links a level copies and where they point: the topology with the operator's switches and the clock.

Two inputs change a link without a file edit: the operator's target switches
(stored durably by whoever runs the DAGs: :mod:`mirrorflow_airflow.state` keeps
them in Airflow's metadata database) and the clock (replication windows).
:func:`effective_links` applies the switches, :func:`split_by_window` the
windows; both are pure, so tests and dry runs can ask what a run would do (a
level run's job spec is built from what they return: :func:`mirrorflow.copy.build_spec`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from mirrorflow.topology.model import Topology
from mirrorflow.topology.tree import Distributor
from mirrorflow.topology.windows import next_opening, window_open

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClosedLink:
    link_id: str
    next_open: datetime
    windows: tuple[str, ...]


def effective_links(topology: Topology, level: int, targets: Mapping[str, str] | None = None) -> list[Distributor]:
    """The level's links with operator switches applied.

    A stored target that is no longer a leaf of the link's sibling subtree (the
    tree changed since) is ignored with a warning: the default target applies.
    """
    out = []
    for link in topology.links(level):
        wanted = (targets or {}).get(link.link_id)
        if wanted and wanted != link.default_target:
            if link.accepts(wanted):
                link = link.with_target(wanted)
            else:
                log.warning("%s: stored target %s is not in the link's sibling subtree any more (%s); using the "
                            "default target %s", link.link_id, wanted, ", ".join(link.sibling_leaves),
                            link.default_target)
        out.append(link)
    return out


def split_by_window(topology: Topology, links: list[Distributor], now: datetime
                    ) -> tuple[list[Distributor], list[ClosedLink]]:
    """Links whose replication window is open at ``now``, and the closed ones with their next opening."""
    open_, closed = [], []
    for link in links:
        windows = topology.link_settings(link.link_id).parsed_windows()
        if window_open(windows, now):
            open_.append(link)
        else:
            assert windows is not None  # no windows means always open (window_open)
            closed.append(ClosedLink(link.link_id, next_opening(windows, now), tuple(w.text for w in windows)))
    return open_, closed
