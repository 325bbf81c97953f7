"""The planning step of ``mirror_level_<L>``: which links copy in this run, and to which target.

Decided at run time, not parse time, so an operator's target switch and the
replication windows take effect from the next run without a restart; the
copy step (:class:`~mirrorflow_airflow.operators.level_copy.MirrorLevelCopyOperator`)
copies exactly what this step returns.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from airflow.sdk.exceptions import AirflowSkipException

from mirrorflow.journal import audit
from mirrorflow.topology import Topology, effective_links, split_by_window
from mirrorflow_airflow.state import link_targets

log = logging.getLogger(__name__)


def plan_level(topology: Topology, level: int, run_id: str, now: datetime | None = None) -> dict:
    """Which level-``level`` links copy in this run and to which target (logged; returned for ``copy``)."""
    now = now or datetime.now(UTC)
    targets = link_targets()
    links = effective_links(topology, level, targets)
    open_links, closed = split_by_window(topology, links, now)
    for link in links:
        switched = link.default_target != topology.link(link.link_id).default_target
        log.info("link %s: %s -> %s (level %d)%s", link.link_id, link.source, link.default_target, level,
                 " [switched by an operator; topology default " + topology.link(link.link_id).default_target + "]"
                 if switched else "")
    for c in closed:
        log.info("link %s: outside its replication window(s) %s; skipped this run; next window opens at %s",
                 c.link_id, ", ".join(c.windows), c.next_open.isoformat())
    audit("plan", run_id=run_id, level=level,
          links={l.link_id: {"source": l.source, "target": l.default_target} for l in open_links},
          closed={c.link_id: c.next_open.isoformat() for c in closed})
    if not open_links:
        first = min(c.next_open for c in closed)
        raise AirflowSkipException(f"every level-{level} link is outside its replication windows; "
                                   f"the next window opens at {first.isoformat()}")
    return {"level": level, "links": [l.link_id for l in open_links],
            "targets": {l.link_id: l.default_target for l in links}}
