"""One measurement as a whole: the rows, the SLA verdict, what could not be reached, and taking one.

:class:`LagSnapshot` is what the ``mirror_lag_monitor`` DAG stores for other
tasks and the UI; :meth:`LagSnapshot.to_dict` is its JSON format (docs/lag.md,
"Snapshot format"). :func:`measure` takes one, probing every cluster once so that
an unreachable cluster costs one timeout for the whole measurement.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from mirrorflow.kafka import ClusterClient
from mirrorflow.lag.groups import group_lag
from mirrorflow.lag.links import link_lag
from mirrorflow.lag.reach import DEFAULT_TIMEOUT, Clusters
from mirrorflow.lag.rows import WHOLE, GroupPartitionLag, LinkPartitionLag, Violation
from mirrorflow.lag.sla import evaluate
from mirrorflow.topology import Distributor, Topology, split_by_window


@dataclass
class LagSnapshot:
    """One measurement: the rows, the SLA violations, and what could not be reached."""

    taken_at: datetime
    topology: str
    links: list[LinkPartitionLag] = field(default_factory=list)
    groups: list[GroupPartitionLag] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    sla: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    #: Links outside their replication window at ``taken_at``, with when it next opens (ISO): their
    #: pending records wait by design and break no lag bound meanwhile.
    waiting: dict[str, str] = field(default_factory=dict)
    #: What a planned failover of each group would replay and skip now, per other cluster: filled by the
    #: caller (``mirrorflow.offsets.failover_preview``, a part this one does not import), stored as it is.
    failover: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def totals(self) -> dict[str, Any]:
        measured = [r for r in self.links if r.records is not None]
        group_rows = [r for r in self.groups if r.records is not None]
        return {
            "links": len({r.link_id for r in self.links}),
            "link_partitions": len(measured),
            "lagging_link_partitions": sum(1 for r in measured if r.records),
            "link_records": sum(r.records for r in measured),
            "link_max_seconds": max((r.seconds or 0.0 for r in measured), default=0.0),
            "groups": len({(r.cluster, r.group) for r in self.groups if r.group != WHOLE}),
            "group_partitions": len(group_rows),
            "group_records": sum(r.records for r in group_rows),
            "group_max_seconds": max((r.seconds or 0.0 for r in group_rows), default=0.0),
            "errors": sum(1 for r in self.links if r.error) + sum(1 for r in self.groups if r.error),
            "unreachable": sorted(self.unreachable),
            "violations": len(self.violations),
        }

    def per_link(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.links:
            s = out.setdefault(r.link_id, {"level": r.level, "source": r.source, "target": r.target, "partitions": 0,
                                           "records": 0, "max_seconds": 0.0, "errors": []})
            if r.error:
                s["errors"].append(r.error if r.topic == WHOLE else f"{r.topic}[{r.partition}]: {r.error}")
            if r.records is not None:
                s["partitions"] += 1
                s["records"] += r.records
                s["max_seconds"] = max(s["max_seconds"], r.seconds or 0.0)
        return out

    def per_group(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.groups:
            if r.group == WHOLE:
                continue
            s = out.setdefault(f"{r.cluster}/{r.group}", {
                "cluster": r.cluster, "group": r.group, "state": r.state, "members": r.members, "partitions": 0,
                "records": 0, "max_seconds": 0.0, "errors": []})
            if r.error:
                s["errors"].append(r.error)
            if r.records is not None:
                s["partitions"] += 1
                s["records"] += r.records
                s["max_seconds"] = max(s["max_seconds"], r.seconds or 0.0)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able snapshot (see docs/lag.md for its format)."""
        return {
            "taken_at": self.taken_at.isoformat(),
            "topology": self.topology,
            "duration_s": round(self.duration_s, 3),
            "ok": self.ok,
            "totals": self.totals(),
            "per_link": self.per_link(),
            "per_group": self.per_group(),
            "links": [asdict(r) for r in self.links],
            "groups": [asdict(r) for r in self.groups],
            "unreachable": self.unreachable,
            "sla": self.sla,
            "violations": [str(v) for v in self.violations],
            "waiting": self.waiting,
            "failover": self.failover,
        }


def _had_checkpoint(previous: Mapping[str, Any] | None) -> Callable[[str, str, int], bool]:
    """From the previous snapshot: did the link have a checkpoint for the partition (or already miss one)?"""
    had = {(r["link_id"], r["topic"], r["partition"]) for r in (previous or {}).get("links", [])
           if r.get("checkpoint") is not None or r.get("checkpoint_missing")}
    return lambda link_id, topic, partition: (link_id, topic, partition) in had


def measure(topology: Topology, clients: Mapping[str, ClusterClient], links: Iterable[Distributor], *,
            topics: Iterable[str] | None = None, groups: Callable[[str], bool] | None = None,
            group_clusters: Iterable[str] | None = None, unavailable: Mapping[str, str] | None = None,
            now: datetime | None = None, timeout: float = DEFAULT_TIMEOUT,
            previous: Mapping[str, Any] | None = None) -> LagSnapshot:
    """Link lag of ``links``, group lag on ``group_clusters`` (default: every cluster), and the SLA verdict.

    ``groups`` defaults to the topology's offsets selection; ``unavailable`` names
    clusters the caller could not even build a client for (with the reason);
    ``previous`` is the last snapshot's dict (:meth:`LagSnapshot.to_dict`), for
    checkpoints that vanished since.
    """
    started = time.monotonic()
    now = now or datetime.now(UTC)
    reach = Clusters(clients, unavailable, timeout)
    names = sorted(group_clusters) if group_clusters is not None else sorted(topology.clusters)
    links = list(links)
    reach.probe([*names, *(c for link in links for c in (link.source, link.default_target))])
    link_rows = link_lag(topology, reach, links, topics, now, timeout=timeout, had_checkpoint=_had_checkpoint(previous))
    group_rows = group_lag(reach, groups if groups is not None else topology.offsets.selects, now, clusters=names,
                           timeout=timeout)
    waiting = {c.link_id: c.next_open.isoformat() for c in split_by_window(topology, links, now)[1]}
    return LagSnapshot(
        taken_at=now, topology=topology.name, links=link_rows, groups=group_rows, unreachable=reach.unreachable,
        violations=evaluate(topology.lag, link_rows, group_rows, waiting), waiting=waiting,
        sla=topology.lag.model_dump(mode="json", exclude_defaults=True), duration_s=time.monotonic() - started,
    )
