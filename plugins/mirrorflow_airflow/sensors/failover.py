"""Sensor of a planned failover: wait until the target holds every message the groups consumed on the source.

Deferrable by default (the wait runs in the triggerer, same check either way).
It does nothing unless the run is a planned, real failover: an emergency
failover cannot wait for a source that is gone, and a dry run changes nothing
so there is nothing to wait for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mirrorflow_airflow.sensors.base import PollingSensor
from mirrorflow_airflow.triggers.base import PollingTrigger
from mirrorflow_airflow.triggers.failover import GroupReplicatedTrigger


class GroupReplicatedSensor(PollingSensor):
    """:param plan: the failover plan from the preflight task (groups, source, target, mode, dry_run)."""

    check = GroupReplicatedTrigger.CHECK
    template_fields: Sequence[str] = ("plan",)

    def __init__(self, *, plan: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan

    def check_kwargs(self) -> dict[str, Any]:
        return {"groups": list(self.plan["groups"]), "source": self.plan["source"], "target": self.plan["target"]}

    def make_trigger(self, deadline: float) -> PollingTrigger:
        return GroupReplicatedTrigger(**self.check_kwargs(), tree=self.tree, poll_interval=self.poke_interval,
                                      deadline=deadline,
                                      max_errors=self.max_errors)

    def what(self) -> str:
        return (f"replication of what {', '.join(self.plan['groups'])} consumed on {self.plan['source']} "
                f"to {self.plan['target']}")

    def execute(self, context: Any) -> Any:
        if self.plan["mode"] != "planned" or self.plan["dry_run"]:
            self.log.info("%s failover%s: nothing to wait for", self.plan["mode"],
                          " (dry run)" if self.plan["dry_run"] else "")
            return {"status": "skipped"}
        return super().execute(context)
