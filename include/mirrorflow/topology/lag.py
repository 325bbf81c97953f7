"""Lag service levels (topology key ``lag``): what ``mirror_lag_monitor`` alerts on.

All optional; without ``sla`` the monitor only measures and records::

    lag:
      schedule: 1m
      sla: {records: 100000, seconds: 600}          # every link-partition
      links: {c1.L3: {records: 1000, seconds: 120}}  # per link, key by key
      groups:                                        # consumer-group lag, first matching rule wins
        - {groups: "orders-.*", records: 5000}

Records are offsets not yet copied (or not yet consumed); seconds are the age
of the oldest message not yet copied. A missing bound is not checked.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, StrictInt, StrictStr, field_validator

from mirrorflow.topology.base import Model
from mirrorflow.topology.replication import parse_schedule

NonNegativeInt = Annotated[StrictInt, Field(ge=0)]
DEFAULT_LAG_SCHEDULE = "1m"


class Bound(Model):
    records: NonNegativeInt | None = None
    seconds: NonNegativeInt | None = None

    def merged(self, override: Bound | None) -> Bound:
        if override is None:
            return self
        return Bound(records=self.records if override.records is None else override.records,
                     seconds=self.seconds if override.seconds is None else override.seconds)

    def exceeded(self, records: int, seconds: float) -> list[str]:
        """Which bounds ``(records, seconds)`` exceed, as readable phrases."""
        out = []
        if self.records is not None and records > self.records:
            out.append(f"{records} records > {self.records}")
        if self.seconds is not None and seconds > self.seconds:
            out.append(f"{seconds:.0f}s > {self.seconds}s")
        return out


class GroupBound(Bound):
    groups: StrictStr

    @field_validator("groups")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"group pattern {value!r} is not a valid regex: {exc}") from None
        return value


class LagConfig(Model):
    schedule: StrictStr = DEFAULT_LAG_SCHEDULE
    sla: Bound = Field(default_factory=Bound)
    links: dict[StrictStr, Bound] = Field(default_factory=dict)
    groups: list[GroupBound] = Field(default_factory=list)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        parse_schedule(value)
        return value

    def link_bound(self, link_id: str) -> Bound:
        return self.sla.merged(self.links.get(link_id))

    def group_bound(self, group: str) -> Bound | None:
        for rule in self.groups:
            if rule.groups == group or re.fullmatch(rule.groups, group):
                return Bound(records=rule.records, seconds=rule.seconds)
        return None
