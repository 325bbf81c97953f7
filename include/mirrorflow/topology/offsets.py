"""Which consumer groups travel between clusters, and how precisely (topology key ``offsets``).

All optional. A topology without the key distributes every consumer group but
mirrorflow's own, every minute, with the ``exact`` precision::

    offsets:
      schedule: 1m
      groups: ["orders-.*", "billing"]     # names or regexes (full match)
      precision:                           # first matching rule wins
        - {groups: "legacy-.*", precision: timestamp, margin: 120s}
      default_precision: exact
      margin: 60s                          # timestamp precision: how far before the committed message to land

``exact`` is the default because it never skips a message, even when a topic
is written on several clusters at once; ``timestamp`` (Axual's rule) needs
no scan of the target but relies on message timestamps being roughly in order.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, StrictStr, field_validator

# Groups mirrorflow itself uses (link checkpoints, readers) are never distributed: the prefix and the test
# live with the other internal names, and are handed on from here.
from mirrorflow.internal_names import INTERNAL_GROUP_PREFIX as INTERNAL_GROUP_PREFIX
from mirrorflow.internal_names import is_internal_group as is_internal_group
from mirrorflow.topology.base import Model
from mirrorflow.topology.replication import parse_schedule

Precision = Literal["exact", "timestamp"]
PRECISIONS: tuple[str, ...] = ("exact", "timestamp")

DEFAULT_OFFSETS_SCHEDULE = "1m"
DEFAULT_MARGIN_S = 60

_MARGIN = re.compile(r"^(\d+)(ms|s|m)$")


def parse_margin(text: str) -> float:
    """``60s``, ``2m``, ``500ms`` -> seconds."""
    match = _MARGIN.fullmatch(text.strip())
    if not match:
        raise ValueError(f"margin {text!r} must be a duration such as 500ms, 60s or 2m")
    amount, unit = int(match.group(1)), match.group(2)
    return amount * {"ms": 0.001, "s": 1.0, "m": 60.0}[unit]


def _compile(pattern: str, what: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{what} {pattern!r} is not a valid regex: {exc}") from None
    return pattern


def group_matches(patterns: list[str] | tuple[str, ...], group: str) -> bool:
    """A name or regex matches the whole group id."""
    return any(p == group or re.fullmatch(p, group) for p in patterns)


class PrecisionRule(Model):
    groups: StrictStr
    precision: Precision
    margin: StrictStr | None = None

    @field_validator("groups")
    @classmethod
    def _regex(cls, value: str) -> str:
        return _compile(value, "group pattern")

    @field_validator("margin")
    @classmethod
    def _margin(cls, value: str | None) -> str | None:
        if value is not None:
            parse_margin(value)
        return value


class OffsetsConfig(Model):
    schedule: StrictStr = DEFAULT_OFFSETS_SCHEDULE
    groups: list[StrictStr] = Field(default_factory=lambda: [".*"])
    precision: list[PrecisionRule] = Field(default_factory=list)
    default_precision: Precision = "exact"
    margin: StrictStr = f"{DEFAULT_MARGIN_S}s"

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        parse_schedule(value)
        return value

    @field_validator("groups")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return [_compile(p, "group pattern") for p in value]

    @field_validator("margin")
    @classmethod
    def _margin(cls, value: str) -> str:
        parse_margin(value)
        return value

    def selects(self, group: str) -> bool:
        """Distributed groups: the configured patterns, never mirrorflow's own."""
        return not is_internal_group(group) and group_matches(self.groups, group)

    def precision_for(self, group: str) -> tuple[str, float]:
        """(precision, margin in seconds) for ``group``: the first matching rule, else the defaults."""
        for rule in self.precision:
            if group_matches([rule.groups], group):
                return rule.precision, parse_margin(rule.margin or self.margin)
        return self.default_precision, parse_margin(self.margin)
