"""The completeness audit's settings (topology key ``audit``): what ``mirror_audit`` counts and when it judges.

All optional::

    audit:
      schedule: 10m        # how often mirror_audit runs
      window_minutes: 10   # messages are counted per origin and window of their timestamp
      grace_minutes: 15    # a window is judged this long after it ended (copies still on their way)

Changing ``window_minutes`` starts the tallies over (every topic is counted again).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StrictInt, StrictStr, field_validator

from mirrorflow.topology.base import Model
from mirrorflow.topology.replication import parse_schedule

DEFAULT_AUDIT_SCHEDULE = "10m"


class AuditConfig(Model):
    schedule: StrictStr = DEFAULT_AUDIT_SCHEDULE
    window_minutes: Annotated[StrictInt, Field(ge=1, le=1440)] = 10
    grace_minutes: Annotated[StrictInt, Field(ge=0)] = 15

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        parse_schedule(value)
        return value
