"""Lag triggers: wait in the triggerer until links or consumer groups are within a bound.

Each trigger is a :class:`~mirrorflow_airflow.triggers.base.PollingTrigger`
with a fixed check defined here; the sensors of
:mod:`mirrorflow_airflow.sensors.lag` run the same checks in poke mode, so a
deferred wait and a poking wait decide alike.

The checks measure with :mod:`mirrorflow.lag` and read the effective link
targets (operator switches) at every poll: a link switched while a task waits
is measured on its new target, whose checkpoint is the authoritative one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mirrorflow.errors import MirrorflowError
from mirrorflow.lag import (
    DEFAULT_TIMEOUT,
    WHOLE,
    Clusters,
    group_lag,
    group_table,
    group_violations,
    link_lag,
    link_table,
    link_violations,
)
from mirrorflow.topology import effective_links
from mirrorflow.topology.lag import Bound
from mirrorflow.topology.offsets import group_matches
from mirrorflow_airflow.triggers.base import CheckContext, CheckResult, PollingTrigger

#: Rows shown in an event's table and lines in its list of what is still lagging (events are stored in the DB).
TABLE_ROWS = 50


# --------------------------------------------------------------------------- checks


def replication_lag_check(ctx: CheckContext, *, links: list[str] | None = None, topics: list[str] | None = None,
                          max_records: int = 0, max_seconds: float | None = None,
                          timeout: float = DEFAULT_TIMEOUT) -> CheckResult:
    """Done when every selected link-partition has at most ``max_records`` pending and none older than ``max_seconds``.

    ``links``: link ids (default: every link of every level); ``topics``: names
    or regexes narrowing the topology's topics. A link that cannot be measured
    (a cluster down) is never "done".
    """
    topology = ctx.topology
    targets = ctx.link_targets()
    chosen = [l for level in topology.levels for l in effective_links(topology, level, targets)]
    if links is not None:
        for link_id in links:
            topology.link(link_id)  # an unknown id raises, naming the known ones
        chosen = [l for l in chosen if l.link_id in set(links)]
    clients = ctx.clients({c for l in chosen for c in (l.source, l.default_target)})
    rows = link_lag(topology, Clusters(clients, ctx.unresolved, timeout), chosen, topics, timeout=timeout)
    bound = _bound(max_records, max_seconds)
    violations = link_violations(rows, lambda _link: bound)
    measured = [r for r in rows if r.records is not None]
    detail: dict[str, Any] = {
        "links": sorted({r.link_id for r in rows}),
        "targets": {l.link_id: l.default_target for l in chosen},
        "partitions": len(measured),
        "records": sum(r.records or 0 for r in measured),  # measured: records is not None
        "max_seconds": max((r.seconds or 0.0 for r in measured), default=0.0),
        "bound": {"records": max_records, "seconds": max_seconds},
        "lagging": [str(v) for v in violations[:TABLE_ROWS]],
        "lagging_count": len(violations),
        "table": link_table(rows, only_lagging=True, limit=TABLE_ROWS),
    }
    summary = (f"{detail['records']} records pending over {detail['partitions']} partitions of "
               f"{len(detail['links'])} links, oldest {detail['max_seconds']:.0f}s; "
               f"{len(violations)} over the bound")
    return CheckResult(done=not violations, detail=detail, summary=summary)


def consumer_group_lag_check(ctx: CheckContext, *, cluster: str, groups: list[str], max_records: int = 0,
                             max_seconds: float | None = None, timeout: float = DEFAULT_TIMEOUT) -> CheckResult:
    """Done when every group matching ``groups`` on ``cluster`` is within the bound.

    Each name or regex must match at least one group with committed offsets:
    a group that has not consumed anything yet has not caught up.
    """
    if not groups:
        raise MirrorflowError("groups: name at least one consumer group (names or regexes)")
    ctx.topology.cluster(cluster)  # an unknown cluster raises, naming the known ones
    clients = ctx.clients([cluster])
    rows = group_lag(Clusters(clients, ctx.unresolved, timeout), lambda g: group_matches(groups, g),
                     clusters=[cluster], timeout=timeout)
    bound = _bound(max_records, max_seconds)
    problems = [str(v) for v in group_violations(rows, lambda _group: bound, any_bound=True)]
    with_offsets = {r.group for r in rows if r.group != WHOLE and r.topic != WHOLE}
    for pattern in groups:
        if not any(group_matches([pattern], g) for g in with_offsets):
            problems.append(f"no group matching {pattern!r} has committed offsets on {cluster}")
    measured = [r for r in rows if r.records is not None]
    detail: dict[str, Any] = {
        "cluster": cluster,
        "groups": sorted({r.group for r in rows if r.group != WHOLE}),
        "partitions": len(measured),
        "records": sum(r.records or 0 for r in measured),  # measured: records is not None
        "max_seconds": max((r.seconds or 0.0 for r in measured), default=0.0),
        "bound": {"records": max_records, "seconds": max_seconds},
        "lagging": problems[:TABLE_ROWS],
        "lagging_count": len(problems),
        "table": group_table(rows, only_lagging=False, limit=TABLE_ROWS),
    }
    summary = (f"{cluster}: {detail['records']} records pending for {len(detail['groups'])} groups, oldest "
               f"{detail['max_seconds']:.0f}s; {len(problems)} problems")
    return CheckResult(done=not problems, detail=detail, summary=summary)


def _bound(max_records: int | None, max_seconds: float | None) -> Bound:
    # Bound holds whole seconds; a fractional bound rounds down (stricter, never looser)
    return Bound(records=max_records, seconds=None if max_seconds is None else int(max_seconds))


# --------------------------------------------------------------------------- triggers


class ReplicationLagTrigger(PollingTrigger):
    """Fires when the given links (or all) are within ``max_records`` / ``max_seconds`` on the given topics."""

    CHECK = f"{__name__}.replication_lag_check"

    def __init__(self, *, links: Iterable[str] | None = None, topics: Iterable[str] | None = None,
                 max_records: int = 0, max_seconds: float | None = None, timeout: float = DEFAULT_TIMEOUT,
                 poll_interval: float = 30.0, deadline: float | None = None, max_errors: int = 3,
                 tree: str = "") -> None:
        self.links = None if links is None else sorted(links)
        self.topics = None if topics is None else list(topics)
        self.max_records, self.max_seconds, self.timeout = max_records, max_seconds, timeout
        super().__init__(check=self.CHECK, check_kwargs=self._check_kwargs(), poll_interval=poll_interval,
                         deadline=deadline, max_errors=max_errors, tree=tree)

    def _check_kwargs(self) -> dict[str, Any]:
        return {"links": self.links, "topics": self.topics, "max_records": self.max_records,
                "max_seconds": self.max_seconds, "timeout": self.timeout}

    def trigger_kwargs(self) -> dict[str, Any]:
        return {**self._check_kwargs(), **self._polling_kwargs()}

    def describe(self) -> str:
        return f"replication lag of {', '.join(self.links) if self.links else 'every link'}"


class ConsumerGroupLagTrigger(PollingTrigger):
    """Fires when every group matching ``groups`` on ``cluster`` is within the bound."""

    CHECK = f"{__name__}.consumer_group_lag_check"

    def __init__(self, *, cluster: str, groups: Iterable[str], max_records: int = 0, max_seconds: float | None = None,
                 timeout: float = DEFAULT_TIMEOUT, poll_interval: float = 30.0, deadline: float | None = None,
                 max_errors: int = 3, tree: str = "") -> None:
        self.cluster, self.groups = cluster, list(groups)
        self.max_records, self.max_seconds, self.timeout = max_records, max_seconds, timeout
        super().__init__(check=self.CHECK, check_kwargs=self._check_kwargs(), poll_interval=poll_interval,
                         deadline=deadline, max_errors=max_errors, tree=tree)

    def _check_kwargs(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "groups": self.groups, "max_records": self.max_records,
                "max_seconds": self.max_seconds, "timeout": self.timeout}

    def trigger_kwargs(self) -> dict[str, Any]:
        return {**self._check_kwargs(), **self._polling_kwargs()}

    def describe(self) -> str:
        return f"lag of groups {', '.join(self.groups)} on {self.cluster}"
