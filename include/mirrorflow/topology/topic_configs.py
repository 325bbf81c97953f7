"""Topic configs kept in sync after creation (topology key ``topic_configs``): whose win, which stay local.

All optional. Without the key, every mirrored topic's travelling configs (retention,
cleanup and compaction, segment rolling, compression, ``max.message.bytes``, the
timestamp settings: :data:`mirrorflow.kafka.TRAVELLING_CONFIGS`) follow the
**first cluster listed under ``clusters``**, and every level run aligns its links'
targets with it::

    topic_configs:
      owner: c1                        # the default owner (default: the first cluster listed)
      owners:                          # per topic pattern (full match; the first that matches wins)
        "payments\\\\..*": c3
      exclude: [retention.bytes]       # keys each cluster keeps for itself
      on_local_change: overwrite       # or keep_target, report_only
      allow_keeping_less: [retention.ms]   # or true; default: none (below)
      sync: true                       # false: report differences only, change nothing

Cluster-owned settings (replication factor, ``min.insync.replicas``, throttles,
placement, tiered storage) never travel, so they cannot be excluded or owned.

Safe by default: a follower's own value is never overwritten with one that makes it
keep less data (lower or removed ``retention.ms``/``retention.bytes``, a
``cleanup.policy`` gaining ``delete`` or ``compact``) unless ``allow_keeping_less``
names the key or is ``true``; it is declined and reported every run. The owner's own
changes still travel to followers that held its previous value. See docs/topics.md,
"Configs kept in sync" and "Safe by default".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictStr, field_validator
from pydantic_core import PydanticCustomError

from mirrorflow.cluster_sync import ConfigOwnership
from mirrorflow.kafka import KEEPING_CONFIGS, TRAVELLING_CONFIGS
from mirrorflow.topology.base import Model, check_patterns


class TopicConfigsConfig(Model):
    """Which cluster owns each topic's travelling configs, and what a follower may keep."""

    sync: StrictBool = True
    owner: StrictStr | None = None
    owners: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    exclude: list[StrictStr] = Field(default_factory=list)
    on_local_change: Literal["overwrite", "keep_target", "report_only"] = "overwrite"
    #: Keys whose follower values the sync may overwrite although the follower then keeps less data.
    allow_keeping_less: StrictBool | list[StrictStr] = False

    @field_validator("allow_keeping_less")
    @classmethod
    def _keeping(cls, value: bool | list[str]) -> bool | list[str]:
        for key in value if isinstance(value, list) else ():
            if key not in KEEPING_CONFIGS:
                raise PydanticCustomError(
                    "not_keeping", "{key!r} cannot make a topic keep less data, so it needs no permission (keys "
                    "that can: {known}; or true for all of them)",
                    {"key": key, "known": ", ".join(sorted(KEEPING_CONFIGS))})
        return value

    @field_validator("owners")
    @classmethod
    def _patterns(cls, value: dict[str, str]) -> dict[str, str]:
        check_patterns(value)
        return value

    @field_validator("exclude")
    @classmethod
    def _travelling(cls, value: list[str]) -> list[str]:
        for key in value:
            if key not in TRAVELLING_CONFIGS:
                raise PydanticCustomError(
                    "not_travelling",
                    "{key!r} is not a config that travels with a topic, so it is local already (travelling: "
                    "{known})", {"key": key, "known": ", ".join(sorted(TRAVELLING_CONFIGS))})
        return value

    def ownership(self, first_cluster: str) -> ConfigOwnership | None:
        """The rules the copy engine applies; ``None`` when ``sync`` is off."""
        if not self.sync:
            return None
        allowed = self.allow_keeping_less
        return ConfigOwnership(default_owner=self.owner or first_cluster, owners=tuple(self.owners.items()),
                               exclude=frozenset(self.exclude), on_local_change=self.on_local_change,
                               allow_keeping_less=KEEPING_CONFIGS if allowed is True
                               else frozenset(allowed or ()))
