"""Replication lag per link-partition and consumer-group lag per cluster, checked against the topology's SLA.

What an operator asks before a failover or when the level DAGs fall behind:
*how far behind is each link, and since when?* Two numbers per partition:
**records** (offsets not yet copied, or not yet consumed by a group) and
**seconds** (the age of the oldest of them). A count says how much work there
is; an age says how stale a reader is, which is what an SLA is about.
docs/lag.md defines both, the topology keys and the snapshot format.

The package, by what each module holds:

- :mod:`~mirrorflow.lag.rows`: the row and violation types;
- :mod:`~mirrorflow.lag.reach`: :class:`Clusters`, each cluster probed once per measurement;
- :mod:`~mirrorflow.lag.links` and :mod:`~mirrorflow.lag.groups`: link lag and consumer-group lag;
- :mod:`~mirrorflow.lag.ages`: seconds behind, from the first pending message's timestamp;
- :mod:`~mirrorflow.lag.sla`: violations of the topology's ``lag`` bounds;
- :mod:`~mirrorflow.lag.snapshot`: :class:`LagSnapshot` and :func:`measure`, which takes one;
- :mod:`~mirrorflow.lag.report`: fixed-width tables for logs;
- :mod:`~mirrorflow.lag.waiting`: whether records waiting on a level's links start a run
  (:class:`DataWatch`, the ``on_data`` watcher's rules);
- :mod:`~mirrorflow.lag.backoff`: how long it leaves a link or partition whose runs keep failing alone.

Offsets and committed offsets are read through :mod:`mirrorflow.kafka.admin`,
checkpoints through :mod:`mirrorflow.copy.state`. Import from here: these
names are the package's public face.
"""

from __future__ import annotations

from mirrorflow.lag.ages import LAG_READER_GROUP
from mirrorflow.lag.backoff import Backoff, Failing
from mirrorflow.lag.groups import group_lag
from mirrorflow.lag.links import link_lag
from mirrorflow.lag.reach import DEFAULT_TIMEOUT, Clusters
from mirrorflow.lag.report import group_table, link_table
from mirrorflow.lag.rows import WHOLE, GroupPartitionLag, LinkPartitionLag, Violation
from mirrorflow.lag.sla import evaluate, group_violations, link_violations
from mirrorflow.lag.snapshot import LagSnapshot, measure
from mirrorflow.lag.waiting import DataWatch, Decision, Waiting, waiting

__all__ = [
    "DEFAULT_TIMEOUT",
    "LAG_READER_GROUP",
    "WHOLE",
    "Backoff",
    "Clusters",
    "DataWatch",
    "Decision",
    "Failing",
    "GroupPartitionLag",
    "LagSnapshot",
    "LinkPartitionLag",
    "Violation",
    "Waiting",
    "evaluate",
    "group_lag",
    "group_table",
    "group_violations",
    "link_lag",
    "link_table",
    "link_violations",
    "measure",
    "waiting",
]
