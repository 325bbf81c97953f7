"""Which links a level run copies, to which target, with which settings: from topology and operator state.

Two inputs change a link without a file edit: the operator's target switches
(stored durably by whoever runs the DAGs: :mod:`mirrorflow_airflow.state` keeps
them in Airflow's metadata database) and the clock (replication windows). This
module turns those into a :class:`~mirrorflow.copy.job.JobSpec`; it is pure,
so tests and dry runs can ask what a run would do.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mirrorflow.copy.job import JobSpec, LinkJob
from mirrorflow.defaults import DEFAULT_ON_GAP
from mirrorflow.topology import Distributor, Topology
from mirrorflow.topology.replication import next_opening, window_open

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


def link_job(topology: Topology, link: Distributor) -> LinkJob:
    settings = topology.link_settings(link.link_id)
    return LinkJob(
        link_id=link.link_id, level=link.level, source=link.source, target=link.default_target,
        max_bytes_per_second=settings.max_bytes_per_second,
        max_records_per_run=settings.max_records_per_run,
        max_bytes_per_run=settings.max_bytes_per_run,
        txn_records=settings.txn_records,
        exactly_once=settings.exactly_once is not False,
        on_gap=settings.on_gap or DEFAULT_ON_GAP,
        switched=link.default_target != topology.link(link.link_id).default_target,
    )


def heals_from_archive(topology: Topology, links: list[Distributor]) -> bool:
    """Whether any of ``links`` heals a gap from the archive (``on_gap: restore``): its job needs the location."""
    return any(topology.link_settings(link.link_id).on_gap == "restore" for link in links)


def build_spec(topology: Topology, level: int, run_id: str, links: list[Distributor],
               clusters: Mapping[str, Mapping[str, Any]], slots: int | None = None,
               archive: Mapping[str, Any] | None = None) -> JobSpec:
    """The job spec for ``links`` (already switched and window-filtered); ``clusters`` holds client settings.

    ``archive``: the archive's location (``ArchiveLocation.to_dict()``), for links with ``on_gap: restore``.
    """
    needed = sorted({c for link in links for c in (link.source, link.default_target)})
    missing = [c for c in needed if c not in clusters]
    if missing:
        raise ValueError(f"no client settings for cluster(s) {', '.join(missing)}")
    return JobSpec(
        level=level, run_id=run_id, topics=tuple(topology.topics),
        links=tuple(link_job(topology, link) for link in links),
        clusters={c: dict(clusters[c]) for c in needed}, slots=slots,
        copy_threads=topology.replication.copy_threads,
        archive=dict(archive) if archive is not None else None,
        archived=tuple(topology.archive.archived(topology.leaves)) if archive is not None else (),
    )
