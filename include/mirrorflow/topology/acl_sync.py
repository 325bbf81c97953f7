"""Topic ACLs kept in sync (topology key ``acl_sync``): off by default.

With it on, the ACL bindings on mirrored topics travel from one cluster to every
other in each level run (:mod:`mirrorflow.cluster_sync.acl_plan` says which and as what,
:mod:`mirrorflow.cluster_sync.acl_sync` carries them)::

    acl_sync:
      enabled: true
      owner: c1                      # default: topic_configs.owner, else the first cluster listed
      groups: ["orders-.*"]          # group bindings that travel too (default: none)
      principals:                    # a principal named differently on a cluster
        c3: {"User:alice": "User:alice-eu"}
      unmapped: {c2: keep}           # where a principal principals does not name has the same name (default:
                                     # report: its grants do not go there, and each is reported every run)
      write: keep                    # or read: WRITE and ALL grants arrive as READ (MirrorMaker 2's way)
      max_delete_share: 0.5          # a run that would delete more of mirrorflow's grants on a cluster deletes none
      read_only: [c4]                # only mirrorflow writes mirrored topics there (works without enabled)

Never travel, and are reported every run: a wildcard principal, the wildcard topic,
and a prefix the topology does not mirror in full. Both keys added later default to
what cannot widen nor wipe access: a file written before them keeps loading, and
its unmapped principals stop travelling (reported, so the change is seen).

Every cluster involved needs an authorizer; mirrorflow's principal needs ``DESCRIBE``
on the owner's cluster resource and ``ALTER`` on the others' (``python -m mirrorflow.acls``).
See docs/security.md, "ACLs kept in sync" and "Read-only clusters".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, field_validator
from pydantic_core import PydanticCustomError

from mirrorflow.cluster_sync import MAX_DELETE_SHARE, UnmappedRule, is_wildcard
from mirrorflow.topology.base import Model, check_patterns


class AclSyncConfig(Model):
    """Whether topic ACLs travel, from which cluster, and as what."""

    enabled: StrictBool = False
    owner: StrictStr | None = None
    groups: list[StrictStr] = Field(default_factory=list)
    principals: dict[StrictStr, dict[StrictStr, StrictStr]] = Field(default_factory=dict)
    write: Literal["keep", "read"] = "keep"
    read_only: list[StrictStr] = Field(default_factory=list)
    #: cluster -> ``keep`` (an unnamed principal travels under its own name there) or ``report`` (the default).
    unmapped: dict[StrictStr, UnmappedRule] = Field(default_factory=dict)
    #: The largest share of mirrorflow's grants on a cluster one run may delete (1: no bound, 0: no deletion).
    max_delete_share: StrictFloat | StrictInt = Field(default=MAX_DELETE_SHARE, ge=0, le=1)

    @field_validator("groups")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        check_patterns(value)
        return value

    @field_validator("principals")
    @classmethod
    def _principals(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for cluster, mapping in value.items():
            for name in (*mapping, *mapping.values()):
                if ":" not in name:
                    raise PydanticCustomError("principal", "{cluster}: a principal is TYPE:NAME (User:alice), got "
                                              "'{name}'", {"cluster": cluster, "name": name})
                if is_wildcard(name):
                    raise PydanticCustomError("principal", "{cluster}: '{name}' is every principal: a wildcard never "
                                              "travels, so it is mapped neither from nor to",
                                              {"cluster": cluster, "name": name})
        return value
