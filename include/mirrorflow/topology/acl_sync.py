"""Topic ACLs kept in sync (topology key ``acl_sync``): off by default.

With it on, the ACL bindings on mirrored topics travel from one cluster to every
other in each level run (:mod:`mirrorflow.kafka.grants` says which and as what)::

    acl_sync:
      enabled: true
      owner: c1                      # default: topic_configs.owner, else the first cluster listed
      groups: ["orders-.*"]          # group bindings that travel too (default: none)
      principals:                    # a principal named differently on a cluster
        c3: {"User:alice": "User:alice-eu"}
      write: keep                    # or read: WRITE and ALL grants arrive as READ (MirrorMaker 2's way)
      read_only: [c4]                # only mirrorflow writes mirrored topics there (works without enabled)

Every cluster involved needs an authorizer; mirrorflow's principal needs ``DESCRIBE``
on the owner's cluster resource and ``ALTER`` on the others' (``python -m mirrorflow.acls``).
See docs/security.md, "ACLs kept in sync" and "Read-only clusters".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictStr, field_validator
from pydantic_core import PydanticCustomError

from mirrorflow.topology.base import Model, check_patterns


class AclSyncConfig(Model):
    """Whether topic ACLs travel, from which cluster, and as what."""

    enabled: StrictBool = False
    owner: StrictStr | None = None
    groups: list[StrictStr] = Field(default_factory=list)
    principals: dict[StrictStr, dict[StrictStr, StrictStr]] = Field(default_factory=dict)
    write: Literal["keep", "read"] = "keep"
    read_only: list[StrictStr] = Field(default_factory=list)

    @field_validator("groups")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        check_patterns(value)
        return value

    @field_validator("principals")
    @classmethod
    def _principals(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for mapping in value.values():
            for name in (*mapping, *mapping.values()):
                if ":" not in name:
                    raise PydanticCustomError("principal", "a principal is TYPE:NAME (User:alice), got {name!r}",
                                              {"name": name})
        return value
