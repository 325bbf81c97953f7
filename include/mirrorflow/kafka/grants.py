"""Topic ACLs that travel from one cluster to every other (topology key ``acl_sync``): which, as what, which go.

Pure; :mod:`mirrorflow.kafka.grant_sync` reads and writes the clusters.

- **Which travel.** The owner's ALLOW and DENY bindings on mirrored topics: literal
  names the topology selects, and prefixed patterns that cover a mirrored topic the
  owner has. Group bindings only where the topology names the groups. Never a
  binding of mirrorflow's own principal, never one on an internal topic or group,
  never the wildcard ``*`` (it would grant on topics that are not mirrored).
- **As what.** Each principal as the cluster names it (``principals``), and a
  ``WRITE`` or ``ALL`` grant either kept or turned into ``READ`` (``write: read``,
  MirrorMaker 2's way). DENY bindings travel as they are.
- **Which go.** Only what differs is created or deleted. A grant is deleted only if
  mirrorflow created it (its record on that cluster says so) and the owner no longer
  has it: a grant someone made by hand is never touched, even one the owner also has.

Each result explains itself, as :mod:`mirrorflow.copyflags` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mirrorflow.internal_names import is_internal_group, is_internal_topic

WriteRule = Literal["keep", "read"]
#: Operations a ``write: read`` rule turns into ``READ``.
WRITING = frozenset({"WRITE", "ALL"})


@dataclass(frozen=True, order=True)
class Grant:
    """One ACL binding, in Kafka's names (``TOPIC``/``GROUP``, ``LITERAL``/``PREFIXED``, ``READ``, ``ALLOW``)."""

    resource_type: str
    name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    def key(self) -> str:
        """A stable text of the binding: its record's key on a cluster."""
        return json.dumps([self.resource_type, self.name, self.pattern_type, self.principal, self.host,
                           self.operation, self.permission])

    @classmethod
    def from_key(cls, key: str) -> Grant:
        return cls(*json.loads(key))

    def __str__(self) -> str:
        return (f"{self.permission} {self.principal} {self.operation} on {self.resource_type} {self.name!r} "
                f"({self.pattern_type.lower()}) from {self.host}")


@dataclass(frozen=True)
class GrantRules:
    """What travels and as what: the owner, the mirrored topic and group patterns, principals, the write rule."""

    owner: str
    topics: tuple[str, ...]
    groups: tuple[str, ...] = ()
    #: cluster -> the owner's principal -> the same principal's name on that cluster.
    principals: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    write: WriteRule = "keep"
    #: Whether the owner's grants travel at all (``acl_sync.enabled``); read-only clusters work without.
    sync: bool = True
    #: Clusters where only mirrorflow writes mirrored topics (:mod:`mirrorflow.kafka.guard`).
    read_only: tuple[str, ...] = ()

    def mirrors(self, topic: str) -> bool:
        """Whether ``topic`` is a mirrored topic (not an internal one)."""
        return not is_internal_topic(topic) and _full(self.topics, topic)

    def to_dict(self) -> dict[str, Any]:
        return {"owner": self.owner, "topics": list(self.topics), "groups": list(self.groups),
                "principals": {c: dict(m) for c, m in self.principals.items()}, "write": self.write,
                "sync": self.sync, "read_only": list(self.read_only)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GrantRules:
        write = data.get("write", "keep")
        if write not in ("keep", "read"):
            raise ValueError(f"write must be keep or read, got {write!r}")
        return cls(owner=str(data["owner"]), topics=tuple(data.get("topics") or ()),
                   groups=tuple(data.get("groups") or ()),
                   principals={str(c): {str(k): str(v) for k, v in m.items()}
                               for c, m in (data.get("principals") or {}).items()}, write=write,
                   sync=bool(data.get("sync", True)), read_only=tuple(data.get("read_only") or ()))


def _full(patterns: Iterable[str], name: str) -> bool:
    return any(re.fullmatch(p, name) for p in patterns)


def travels(grant: Grant, rules: GrantRules, owner_topics: Iterable[str], own: Iterable[str]) -> bool:
    """Whether ``grant``, read on the owner, goes to the other clusters.

    ``owner_topics``: the mirrored topics the owner has (a prefixed binding travels
    when it covers one); ``own``: mirrorflow's principals, whose bindings never travel.
    """
    if grant.principal in set(own) or grant.name == "*" or grant.pattern_type not in ("LITERAL", "PREFIXED"):
        return False
    if grant.resource_type == "TOPIC":
        if grant.pattern_type == "LITERAL":
            return not is_internal_topic(grant.name) and _full(rules.topics, grant.name)
        return not is_internal_topic(grant.name) and any(
            t.startswith(grant.name) and not is_internal_topic(t) for t in owner_topics)
    if grant.resource_type == "GROUP":
        # a prefixed group binding travels when its prefix is itself a name the group patterns select
        return not is_internal_group(grant.name) and _full(rules.groups, grant.name)
    return False


def as_on(grant: Grant, rules: GrantRules, cluster: str) -> Grant:
    """The owner's ``grant`` as ``cluster`` gets it: its principal named there, and the write rule applied."""
    principal = rules.principals.get(cluster, {}).get(grant.principal, grant.principal)
    operation = grant.operation
    if rules.write == "read" and grant.permission == "ALLOW" and operation in WRITING:
        operation = "READ"
    return Grant(grant.resource_type, grant.name, grant.pattern_type, principal, grant.host, operation,
                 grant.permission)


@dataclass(frozen=True)
class GrantPlan:
    """What one cluster gets: grants to create and to delete, and the record of what mirrorflow made there."""

    cluster: str
    owner: str
    create: tuple[Grant, ...]
    delete: tuple[Grant, ...]
    #: Grants mirrorflow made on the cluster once the plan is carried out (its record).
    made: frozenset[Grant]
    #: Grants the owner has that the cluster already holds, made by someone else: left alone, never recorded.
    found: tuple[Grant, ...] = ()

    def explain(self) -> list[str]:
        return ([f"{self.cluster}: create {g} (as on {self.owner})" for g in self.create]
                + [f"{self.cluster}: delete {g}: gone from {self.owner}, and mirrorflow made it" for g in self.delete])


def plan_grants(cluster: str, owner: str, wanted: Iterable[Grant], have: Iterable[Grant],
                made: Iterable[Grant]) -> GrantPlan:
    """Create what ``cluster`` lacks of ``wanted``; delete what mirrorflow ``made`` there that is not wanted.

    ``have``: the cluster's bindings now; ``made``: its record. A made grant someone
    deleted by hand is dropped from the record (and, if still wanted, made again).
    """
    wanted, have, made = set(wanted), set(have), set(made)
    create = sorted(wanted - have)
    delete = sorted((made - wanted) & have)
    return GrantPlan(cluster, owner, tuple(create), tuple(delete),
                     frozenset(((made & have) - set(delete)) | set(create)), tuple(sorted((wanted & have) - made)))
