"""Failover wait: until the target holds every message the groups consumed on the source.

The check reads the groups' positions that reached the target (published by
the source, carried by ``_mirrorflow.offsets``) and, per partition, looks for
the last consumed message of each origin on the target (see
:func:`mirrorflow.offsets.failover.missing_on_target`). Per-origin order means
finding that one message proves every earlier one is there too.
"""

from __future__ import annotations

from typing import Any

from mirrorflow.offsets.failover import distributed_positions, missing_on_target
from mirrorflow_airflow.triggers.base import CheckContext, CheckResult, PollingTrigger

TABLE_ROWS = 50


def group_replicated_check(ctx: CheckContext, *, groups: list[str], source: str, target: str) -> CheckResult:
    """Done when the source's latest positions of ``groups`` are on the target and the target holds what they cover."""
    client = ctx.client(target)
    positions = distributed_positions(client, source, groups)
    problems = [f"no position of group {g} from {source} has reached {target} yet"
                for g in groups if not any(p.group == g for p in positions)]
    missing = missing_on_target(client, positions) if positions else {}
    problems += [f"{name}: {target} lacks the last consumed message of {', '.join(origins)}"
                 for name, origins in sorted(missing.items())]
    detail: dict[str, Any] = {"source": source, "target": target, "groups": groups,
                              "partitions": len(positions), "bound": {"records": 0, "seconds": None},
                              "lagging": problems[:TABLE_ROWS], "lagging_count": len(problems)}
    summary = (f"{target} holds everything {', '.join(groups)} consumed on {source}" if not problems else
               f"{len(problems)} partitions of {', '.join(groups)} not yet replicated from {source} to {target}")
    return CheckResult(done=not problems, detail=detail, summary=summary)


class GroupReplicatedTrigger(PollingTrigger):
    CHECK = f"{__name__}.group_replicated_check"

    def __init__(self, *, groups: list[str], source: str, target: str, poll_interval: float = 30.0,
                 deadline: float | None = None, max_errors: int = 3, tree: str = "") -> None:
        self.groups, self.source, self.target = list(groups), source, target
        super().__init__(check=self.CHECK, check_kwargs={"groups": self.groups, "source": source, "target": target},
                         poll_interval=poll_interval, deadline=deadline, max_errors=max_errors, tree=tree)

    def trigger_kwargs(self) -> dict[str, Any]:
        return {"groups": self.groups, "source": self.source, "target": self.target, **self._polling_kwargs()}
