"""Incidents of ``mirror_lag_monitor``: one per link, group or cluster that violates the topology's ``lag`` bounds.

Read from the snapshot the monitor stores (docs/lag.md, "Snapshot format"): its
rows are held again to the bounds it was taken with (the snapshot's ``sla``), so
each violation keeps its row, and the rows of one subject make one incident. A
link or group row that was not measured because a cluster did not answer belongs
to that cluster's incident (kind ``unreachable``), not to every link of it. The
completeness audit's problems, which the monitor's ``check`` counts too, are the
``mirror_audit`` DAG's own incidents (:mod:`mirrorflow.alerts.audit`), not these.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.alerts.incident import Findings, Incident
from mirrorflow.lag.rows import WHOLE, GroupPartitionLag, LinkPartitionLag
from mirrorflow.lag.sla import group_violations, link_violations
from mirrorflow.topology.lag import Bound, LagConfig

SOURCE = "mirror_lag_monitor"
#: When one subject has violations of several kinds, the incident takes the first of these.
SEVERITY = ("gap", "truncated", "checkpoint", "unreachable", "lag")


@dataclass
class _Subject:
    key: str
    subject: str
    scopes: tuple[str, ...]
    kinds: set[str] = field(default_factory=set)
    details: list[str] = field(default_factory=list)
    records: int = 0
    seconds: float = 0.0
    measured: bool = False
    bound: Bound | None = None
    reason: str | None = None

    def add(self, kind: str, details: Iterable[str], records: int | None, seconds: float | None) -> None:
        self.kinds.add(kind)
        self.details += [d for d in details if d not in self.details]
        if records is not None:
            self.measured = True
            self.records += records
            self.seconds = max(self.seconds, seconds or 0.0)

    @property
    def kind(self) -> str:
        return next(k for k in SEVERITY if k in self.kinds)

    def summary(self, what: str) -> str:
        kind = self.kind
        if kind == "unreachable":
            return f"{self.subject} {self.reason}" if self.reason else f"{self.subject}: {self.details[0]}"
        if kind != "lag":
            more = f" (and {len(self.details) - 1} more)" if len(self.details) > 1 else ""
            return f"{self.details[0]}{more}"
        if not self.measured:
            return f"{self.details[0]}"
        return (f"{self.subject}: {self.records} records {what}, the oldest {self.seconds:.0f} s old "
                f"(SLA: {bound_text(self.bound)})")


def bound_text(bound: Bound | None) -> str:
    """``at most 100 records and 60 s``; ``none`` without a bound."""
    if bound is None or (bound.records is None and bound.seconds is None):
        return "none"
    parts = ([f"{bound.records} records"] if bound.records is not None else []) + (
        [f"{bound.seconds} s"] if bound.seconds is not None else [])
    return "at most " + " and ".join(parts)


def _rows(cls: type, data: Iterable[Mapping[str, Any]]) -> list[Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return [cls(**{k: v for k, v in row.items() if k in names}) for row in data]


def lag_incidents(snapshot: Mapping[str, Any], source: str = SOURCE) -> Findings:
    """Every incident of one snapshot (:meth:`mirrorflow.lag.LagSnapshot.to_dict`); it looked at everything."""
    config = LagConfig.model_validate(snapshot.get("sla") or {})
    unreachable: Mapping[str, str] = snapshot.get("unreachable") or {}
    waiting = set(snapshot.get("waiting") or {})  # outside their replication window: held to no bound
    subjects: dict[str, _Subject] = {}

    def cluster(name: str) -> _Subject:
        s = subjects.setdefault(f"cluster:{name}", _Subject(f"{source}:cluster:{name}", f"cluster {name}", (name,)))
        s.reason = unreachable.get(name)
        return s

    for row in _rows(LinkPartitionLag, snapshot.get("links") or []):
        found = [v.text for v in link_violations([row], config.link_bound, waiting)]
        if not found:
            continue
        down = [c for c in (row.source, row.target) if c in unreachable] if row.error else []
        if down:
            for name in down:
                cluster(name).add("unreachable", found, None, None)
            continue
        s = subjects.setdefault(f"link:{row.link_id}", _Subject(
            f"{source}:link:{row.link_id}", f"link {row.link_id} {row.source} -> {row.target}",
            (row.link_id, row.source, row.target), bound=config.link_bound(row.link_id)))
        kinds = ({"gap"} if row.gap else set()) | ({"truncated"} if row.truncated else set()) | (
            {"checkpoint"} if row.checkpoint_missing else set())
        over = len(found) > len(kinds)  # the rest of the violations are over a bound (or not measured)
        for kind in kinds | ({"lag"} if over else set()):
            s.add(kind, found, None, None)
        if over and row.records is not None:
            s.add("lag", (), row.records, row.seconds)

    for grow in _rows(GroupPartitionLag, snapshot.get("groups") or []):
        found = [v.text for v in group_violations([grow], config.group_bound, any_bound=bool(config.groups))]
        if not found:
            continue
        if grow.group == WHOLE:
            if grow.cluster in unreachable:
                cluster(grow.cluster).add("unreachable", found, None, None)
            else:
                subjects.setdefault(f"cluster:{grow.cluster}", _Subject(
                    f"{source}:cluster:{grow.cluster}", f"cluster {grow.cluster}", (grow.cluster,))).add(
                    "lag", found, None, None)
            continue
        s = subjects.setdefault(f"group:{grow.cluster}/{grow.group}", _Subject(
            f"{source}:group:{grow.cluster}/{grow.group}", f"group {grow.group} on {grow.cluster}", (grow.cluster,),
            bound=config.group_bound(grow.group)))
        s.add("lag", found, grow.records, grow.seconds)

    incidents = tuple(
        Incident(s.key, s.kind, source, s.subject,
                 s.summary("not consumed" if name.startswith("group:") else "behind"), tuple(s.details), s.scopes)
        for name, s in sorted(subjects.items()))
    return Findings(source, incidents, examined=None)

