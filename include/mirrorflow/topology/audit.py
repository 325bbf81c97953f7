"""The completeness audit's settings (topology key ``audit``): what ``mirror_audit`` counts and when it judges.

All optional::

    audit:
      schedule: 10m        # how often mirror_audit runs
      window_minutes: 10   # messages are counted per origin and window of their timestamp
      grace_minutes: 15    # a window is judged this long after it ended (copies still on their way)
      assets: [payments.eu]  # topics whose proven windows are Airflow assets, besides those named in topics

Changing ``window_minutes`` starts the tallies over (every topic is counted again).
An asset needs its topic's name when the DAG file is parsed: every entry of
``topics`` that is a plain name (``orders``, ``payments\\.eu``) is one; a topic
only a pattern selects is named under ``assets`` (docs/assets.md).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, StrictInt, StrictStr, field_validator

from mirrorflow.topology.base import Model
from mirrorflow.topology.replication import parse_schedule

DEFAULT_AUDIT_SCHEDULE = "10m"


class AuditConfig(Model):
    schedule: StrictStr = DEFAULT_AUDIT_SCHEDULE
    window_minutes: Annotated[StrictInt, Field(ge=1, le=1440)] = 10
    grace_minutes: Annotated[StrictInt, Field(ge=0)] = 15
    assets: list[StrictStr] = Field(default_factory=list)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        parse_schedule(value)
        return value


#: A plain topic name written as a pattern: letters, digits, ``_``, ``-`` and escaped dots.
_PLAIN = re.compile(r"(?:[A-Za-z0-9_-]|\\\.)+")


def plain_name(pattern: str) -> str | None:
    """The one topic ``pattern`` selects when it is a plain name (``payments\\.eu`` -> ``payments.eu``), else None."""
    return pattern.replace("\\.", ".") if _PLAIN.fullmatch(pattern) else None
