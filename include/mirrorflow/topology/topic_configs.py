"""Topic configs kept in sync after creation (topology key ``topic_configs``): whose win, which stay local.

All optional. Without the key, every mirrored topic's travelling configs (retention,
cleanup and compaction, segment rolling, compression, ``max.message.bytes``, the
timestamp settings: :data:`mirrorflow.kafka.ownership.TRAVELLING_CONFIGS`) follow the
**first cluster listed under ``clusters``**, and every level run aligns its links'
targets with it::

    topic_configs:
      owner: c1                        # the default owner (default: the first cluster listed)
      owners:                          # per topic pattern (full match; the first that matches wins)
        "payments\\\\..*": c3
      exclude: [retention.bytes]       # keys each cluster keeps for itself
      on_local_change: overwrite       # or keep_target, report_only
      sync: true                       # false: report differences only, change nothing

Cluster-owned settings (replication factor, ``min.insync.replicas``, throttles,
placement, tiered storage) never travel, so they cannot be excluded or owned. See
docs/topics.md, "Configs kept in sync".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictStr, field_validator
from pydantic_core import PydanticCustomError

from mirrorflow.kafka.ownership import TRAVELLING_CONFIGS, ConfigOwnership
from mirrorflow.topology.base import Model, check_patterns


class TopicConfigsConfig(Model):
    """Which cluster owns each topic's travelling configs, and what a follower may keep."""

    sync: StrictBool = True
    owner: StrictStr | None = None
    owners: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    exclude: list[StrictStr] = Field(default_factory=list)
    on_local_change: Literal["overwrite", "keep_target", "report_only"] = "overwrite"

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
        return ConfigOwnership(default_owner=self.owner or first_cluster, owners=tuple(self.owners.items()),
                               exclude=frozenset(self.exclude), on_local_change=self.on_local_change)
