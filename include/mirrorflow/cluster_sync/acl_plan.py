"""Topic ACLs that travel from one cluster to every other (topology key ``acl_sync``): which, as what, which go.

Pure; :mod:`mirrorflow.cluster_sync.acl_sync` reads and writes the clusters.

- **Which travel.** The owner's ALLOW and DENY bindings on mirrored topics: literal
  names the topology selects, and prefixed patterns every name of which the topology
  mirrors (``payments.eu`` under ``payments\\..*``): a prefix also covers topics that
  exist only on some cluster, or not yet, and with least privilege mirrorflow cannot
  even list the owner's unmirrored topics, so what exists is no proof. Group bindings
  only where the topology names the groups. Never a binding of mirrorflow's own
  principal, never one on an internal topic or group.
- **Which are declined, and reported** (:class:`Refusal`; nothing widens access in
  silence): the wildcard topic ``*`` and a prefix that also covers unmirrored topics
  (either would grant on topics that are not mirrored), a wildcard principal
  (``User:*``: a DENY would deny mirrorflow too, an ALLOW opens the topic to everyone),
  and a principal the map does not name for the cluster, unless ``unmapped: keep``
  says the names are the same there (else a DENY for ``User:bob`` denies nobody
  where he is ``User:bob-eu``).
- **As what.** Each principal as the cluster names it (``principals``), and a
  ``WRITE`` or ``ALL`` grant either kept or turned into ``READ`` (``write: read``,
  MirrorMaker 2's way). DENY bindings travel as they are. A cluster that names
  mirrored topics or groups its own way (``clusters.<c>.names``) gets each binding
  under its names: the owner's name is read back to the logical one, then said as
  the cluster says it (:func:`logical_grant`, :func:`physical_grant`); a prefix
  that cannot be said there (names with a suffix, a prefix wider than the
  cluster's names) is declined, with why.
- **Which go.** Only what differs is created or deleted. A grant is deleted only if
  mirrorflow created it (its record on that cluster says so) and it no longer
  travels: a grant someone made by hand is never touched, even one the owner also
  has. A run that would delete more than ``max_delete_share`` of mirrorflow's grants
  on a cluster deletes none (an owner rebuilt without its ACLs looks like that).

Each result explains itself, as :mod:`mirrorflow.copyflags` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from mirrorflow.internal_names import (
    INTERNAL_GROUP_PREFIX,
    INTERNAL_TOPIC_NAMES,
    INTERNAL_TOPIC_PREFIXES,
    is_internal_group,
    is_internal_topic,
)
from mirrorflow.naming import GROUP, TOPIC, NameFormat

WriteRule = Literal["keep", "read"]
#: What an owner's principal the map does not name becomes on a cluster: the same name, or nothing (reported).
UnmappedRule = Literal["keep", "report"]
#: The share of mirrorflow's grants on a cluster one run may delete, unless the topology says otherwise.
MAX_DELETE_SHARE = 0.5
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
    #: Clusters where only mirrorflow writes mirrored topics (:mod:`mirrorflow.cluster_sync.read_only_guard`).
    read_only: tuple[str, ...] = ()
    #: cluster -> ``keep``: a principal ``principals`` does not name there travels under its own name;
    #: a cluster not listed (``report``) gets none of those grants, each reported.
    unmapped: Mapping[str, UnmappedRule] = field(default_factory=dict)
    #: The largest share of mirrorflow's grants on a cluster one run may delete; more, and it deletes none.
    max_delete_share: float = MAX_DELETE_SHARE
    #: cluster -> its topic and group formats (``NameFormat.to_dict()``), for the clusters that rename.
    topic_names: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    group_names: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def naming(self, cluster: str, resource_type: str) -> NameFormat:
        """How ``cluster`` names a mirrored topic (``TOPIC``) or a group (``GROUP``): the identity unless it renames."""
        logical = TOPIC if resource_type == "TOPIC" else GROUP
        found = (self.topic_names if resource_type == "TOPIC" else self.group_names).get(cluster)
        return NameFormat.from_dict(found) if found else NameFormat.identity(logical)

    def mirrors(self, topic: str) -> bool:
        """Whether ``topic`` is a mirrored topic (not an internal one)."""
        return not is_internal_topic(topic) and _full(self.topics, topic)

    def to_dict(self) -> dict[str, Any]:
        return {"owner": self.owner, "topics": list(self.topics), "groups": list(self.groups),
                "principals": {c: dict(m) for c, m in self.principals.items()}, "write": self.write,
                "sync": self.sync, "read_only": list(self.read_only), "unmapped": dict(self.unmapped),
                "max_delete_share": self.max_delete_share,
                "topic_names": {c: dict(f) for c, f in self.topic_names.items()},
                "group_names": {c: dict(f) for c, f in self.group_names.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GrantRules:
        """Read :meth:`to_dict` back; a spec written before ``unmapped`` and ``max_delete_share`` gets the safe
        defaults (unmapped principals reported, at most half of mirrorflow's grants deleted per run)."""
        write = data.get("write", "keep")
        if write not in ("keep", "read"):
            raise ValueError(f"write must be keep or read, got {write!r}")
        unmapped = {str(c): r for c, r in (data.get("unmapped") or {}).items()}
        for cluster, rule in unmapped.items():
            if rule not in ("keep", "report"):
                raise ValueError(f"unmapped.{cluster} must be keep or report, got {rule!r}")
        share = data.get("max_delete_share", MAX_DELETE_SHARE)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            raise ValueError(f"max_delete_share must be a number from 0 to 1, got {share!r}")
        return cls(owner=str(data["owner"]), topics=tuple(data.get("topics") or ()),
                   groups=tuple(data.get("groups") or ()),
                   principals={str(c): {str(k): str(v) for k, v in m.items()}
                               for c, m in (data.get("principals") or {}).items()}, write=write,
                   sync=bool(data.get("sync", True)), read_only=tuple(data.get("read_only") or ()),
                   unmapped=unmapped, max_delete_share=float(share),
                   topic_names={str(c): NameFormat.from_dict(f).to_dict()
                                for c, f in (data.get("topic_names") or {}).items()},
                   group_names={str(c): NameFormat.from_dict(f).to_dict()
                                for c, f in (data.get("group_names") or {}).items()})


def _full(patterns: Iterable[str], name: str) -> bool:
    return any(re.fullmatch(p, name) for p in patterns)


def is_wildcard(principal: str) -> bool:
    """Whether ``principal`` names everyone (``User:*``, or ``*`` of any type): it never travels."""
    return principal == "*" or principal.endswith(":*")


def _literal_head(pattern: str) -> str | None:
    """``Q`` when ``pattern`` is exactly ``<Q, escaped or plain>.*`` (it full-matches every name starting with Q)."""
    if not pattern.endswith(".*"):
        return None
    head, out, i = pattern[:-2], [], 0
    while i < len(head):
        if head[i] == "\\" and i + 1 < len(head) and not head[i + 1].isalnum():
            out.append(head[i + 1])
            i += 2
        elif head[i] == "\\" or head[i] in ".^$*+?{}[]|()":
            return None
        else:
            out.append(head[i])
            i += 1
    return "".join(out)


def mirrors_every(prefix: str, patterns: Iterable[str],
                  internal: Iterable[str] = (*INTERNAL_TOPIC_PREFIXES, *INTERNAL_TOPIC_NAMES)) -> bool:
    """Whether ``patterns`` select every name starting with ``prefix``: one of them is ``Q.*`` with ``prefix``
    starting with ``Q``, and no ``internal`` name or prefix (never selected) starts with ``prefix``."""
    if any(p.startswith(prefix) for p in internal):
        return False
    return any(head is not None and prefix.startswith(head) for head in map(_literal_head, patterns))


def covered(grant: Grant, topics: Iterable[str]) -> list[str]:
    """The topics of ``topics`` (internal ones left out) that topic binding ``grant`` applies to, sorted."""
    if grant.resource_type != "TOPIC" or grant.pattern_type not in ("LITERAL", "PREFIXED"):
        return []

    def hit(topic: str) -> bool:
        if grant.pattern_type == "PREFIXED":
            return topic.startswith(grant.name)
        return grant.name in ("*", topic)

    return sorted(t for t in set(topics) if hit(t) and not is_internal_topic(t))


def logical_grant(grant: Grant, naming: NameFormat) -> Grant | Refusal | None:
    """The owner's ``grant`` in logical names, read back with ``naming`` (how the owner names the resource).

    ``None``: it names nothing the owner stores under its names (none of the sync's business).
    A :class:`Refusal`: a prefix that covers the owner's names but cannot be said logically (it is
    wider than the names' fixed start, or they end in a suffix), reported, never applied.
    """
    if naming.is_identity or (grant.pattern_type == "LITERAL" and grant.name == "*"):
        return grant
    if grant.pattern_type == "LITERAL":
        logical = naming.parse(grant.name)
        return None if logical is None else replace(grant, name=logical)
    if grant.pattern_type != "PREFIXED":
        return None
    within = grant.name.startswith(naming.prefix)
    if not within and not naming.prefix.startswith(grant.name):
        return None
    if naming.suffix:
        return Refusal(grant, f"the names here end in {naming.suffix!r} ({naming.template}): a prefix cannot say "
                              "them on another cluster; grant the mirrored topics by name (literal)")
    if not within:
        return Refusal(grant, f"the prefix {grant.name!r} is wider than the names mirrored topics have here "
                              f"({naming.prefix!r}...): it also covers topics that are not mirrored; grant by a "
                              f"prefix that starts with {naming.prefix!r}, or by name")
    return replace(grant, name=grant.name[len(naming.prefix):])


def physical_grant(grant: Grant, naming: NameFormat, cluster: str) -> Grant | str:
    """A travelling ``grant`` (logical names) as ``cluster`` names its resource; a string: why it cannot be said."""
    if grant.pattern_type == "LITERAL":
        return grant if grant.name == "*" or naming.is_identity else replace(grant, name=naming.render(grant.name))
    if naming.suffix:
        return (f"{cluster} names them with the suffix {naming.suffix!r} ({naming.template}): a prefix cannot say "
                "them there; grant the mirrored topics by name (literal)")
    name = naming.prefix + grant.name
    if not name:
        return f"the prefix would be empty on {cluster}: it would cover every name there"
    return replace(grant, name=name)


def _some(names: list[str], most: int = 3) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(repr(n) for n in names[:most]) + more


@dataclass(frozen=True)
class Refusal:
    """A binding on mirrored topics that does not travel to a cluster, why, and the topology key that would let it
    (empty: nothing does). Reported every run (:class:`mirrorflow.declined.Declined`), never applied."""

    #: The binding as it would have been created there.
    grant: Grant
    reason: str
    allow: str = ""

    def explain(self, cluster: str | None = None) -> str:
        where = f"{cluster}: " if cluster else ""
        allow = f"; the topology allows it with {self.allow}" if self.allow else ""
        return f"{where}{self.grant} does not travel: {self.reason}{allow}"


@dataclass(frozen=True)
class Selection:
    """The owner's bindings sorted once per run: those that travel (in the owner's names) and those refused
    everywhere (a wildcard principal, a pattern that also covers unmirrored topics on the owner)."""

    owner: str
    travel: frozenset[Grant]
    refused: tuple[Refusal, ...] = ()

    def explain(self) -> list[str]:
        return ([f"{g}: travels from {self.owner}" for g in sorted(self.travel)]
                + [r.explain() for r in self.refused])


def _concerns(grant: Grant, rules: GrantRules, owner_topics: Iterable[str]) -> bool:
    """Whether ``grant`` is about mirrored topics or named groups at all (else it is no business of the sync's)."""
    if grant.pattern_type not in ("LITERAL", "PREFIXED"):
        return False
    if grant.resource_type == "TOPIC":
        if is_internal_topic(grant.name):
            return False
        if grant.pattern_type == "LITERAL" and grant.name != "*":
            return rules.mirrors(grant.name)
        return any(rules.mirrors(t) for t in covered(grant, owner_topics))
    if grant.resource_type == "GROUP":
        # a prefixed group binding travels when its prefix is itself a name the group patterns select
        return not is_internal_group(grant.name) and _full(rules.groups, grant.name)
    return False


def _unsayable_concerns(grant: Grant, rules: GrantRules, stored: NameFormat, on_owner: list[str]) -> bool:
    """Whether a prefix the owner's names cannot say covers a mirrored topic there, or groups that travel."""
    if grant.resource_type == "GROUP":
        return bool(rules.groups)
    return any((n := stored.parse(t)) is not None and rules.mirrors(n) for t in on_owner if t.startswith(grant.name))


def select(grants: Iterable[Grant], rules: GrantRules, owner_topics: Iterable[str], own: Iterable[str]) -> Selection:
    """Which of the owner's ``grants`` travel, which are refused (each with why), and which are none of the sync's
    business (left out: mirrorflow's own, internal, unmirrored, unnamed groups).

    ``owner_topics``: the topics mirrorflow sees on the owner (a binding on none of the
    mirrored ones is none of the sync's business); ``own``: mirrorflow's principals.
    """
    stored = rules.naming(rules.owner, "TOPIC")  # the owner's names, read back to logical ones
    on_owner = sorted(set(owner_topics))
    owner_topics = sorted({n for t in on_owner if (n := t if is_internal_topic(t) else stored.parse(t))})
    own = set(own)
    travel: set[Grant] = set()
    refused: list[Refusal] = []
    for read in sorted(set(grants)):
        if read.principal in own:
            continue
        said = logical_grant(read, rules.naming(rules.owner, read.resource_type))
        if isinstance(said, Refusal):
            if _unsayable_concerns(read, rules, stored, on_owner):
                refused.append(said)
            continue
        if said is None or not _concerns(said, rules, owner_topics):
            continue
        grant = said
        if grant.resource_type == "TOPIC" and grant.name == "*":
            refused.append(Refusal(grant, "the wildcard topic '*' covers every topic, mirrored or not; grant on the "
                                          "mirrored topics by name instead"))
            continue
        if (grant.resource_type == "TOPIC" and grant.pattern_type == "PREFIXED"
                and not mirrors_every(grant.name, rules.topics)):
            unmirrored = [t for t in covered(grant, owner_topics) if not rules.mirrors(t)]
            seen = f" (on {rules.owner}: {_some(unmirrored)})" if unmirrored else ""
            refused.append(Refusal(grant, f"the prefix {grant.name!r} also covers topics the topology does not "
                                          f"mirror{seen}, there or on another cluster, now or later: it would "
                                          "grant on them too; grant the mirrored topics by name (literal), or "
                                          f"mirror every topic of the prefix (a topics entry such as "
                                          f"{re.escape(grant.name) + '.*'!r})"))
            continue
        if (grant.resource_type == "GROUP" and grant.pattern_type == "PREFIXED"
                and not mirrors_every(grant.name, rules.groups, (INTERNAL_GROUP_PREFIX,))):
            refused.append(Refusal(grant, f"the prefix {grant.name!r} also covers groups acl_sync.groups does not "
                                          "name: it would grant on them too; grant the groups by name (literal), or "
                                          f"name every group of the prefix (such as {re.escape(grant.name) + '.*'!r})"))
            continue
        if is_wildcard(grant.principal):
            refused.append(Refusal(grant, f"{grant.principal} is every principal: on the other clusters it would "
                                          "cover mirrorflow's own principal and everyone else's (a DENY stops "
                                          "mirrorflow, an ALLOW opens the topic to all); grant to named principals"))
            continue
        travel.add(grant)
    return Selection(rules.owner, frozenset(travel), tuple(refused))


def travels(grant: Grant, rules: GrantRules, owner_topics: Iterable[str], own: Iterable[str]) -> bool:
    """Whether ``grant``, read on the owner, leaves it (before each cluster's own check, :func:`arrival`).

    ``owner_topics``: the topics mirrorflow sees on the owner; ``own``: mirrorflow's principals.
    """
    return grant in select([grant], rules, owner_topics, own).travel


def as_on(grant: Grant, rules: GrantRules, cluster: str) -> Grant:
    """The owner's ``grant`` as ``cluster`` gets it: its principal named there (unchanged when the map names it
    not), and the write rule applied."""
    principal = rules.principals.get(cluster, {}).get(grant.principal, grant.principal)
    operation = grant.operation
    if rules.write == "read" and grant.permission == "ALLOW" and operation in WRITING:
        operation = "READ"
    return Grant(grant.resource_type, grant.name, grant.pattern_type, principal, grant.host, operation,
                 grant.permission)


@dataclass(frozen=True)
class Arrival:
    """What of the owner's travelling grants ``cluster`` gets (in its names), and what it does not, each with why."""

    cluster: str
    wanted: frozenset[Grant]
    refused: tuple[Refusal, ...] = ()


def arrival(cluster: str, travel: Iterable[Grant], rules: GrantRules, own: str | None) -> Arrival:
    """The grants of ``travel`` (the owner's, :func:`select`) as ``cluster`` gets them.

    ``own``: mirrorflow's principal there (a binding that lands on it is refused). A
    principal the map does not name for ``cluster`` arrives only with ``unmapped: keep``.
    """
    names = rules.principals.get(cluster, {})
    keep = rules.unmapped.get(cluster, "report") == "keep"
    wanted: set[Grant] = set()
    refused: list[Refusal] = []
    for grant in sorted(set(travel)):
        said = as_on(grant, rules, cluster)
        placed = physical_grant(said, rules.naming(cluster, said.resource_type), cluster)
        there = placed if isinstance(placed, Grant) else said
        if isinstance(placed, str):
            refused.append(Refusal(there, placed))
        elif grant.principal not in names and not keep:
            refused.append(Refusal(there, f"acl_sync.principals.{cluster} does not name {grant.principal}: the same "
                                          f"name may be another principal on {cluster}, or none (a DENY would deny "
                                          f"nobody); map it there, or say the names are the same",
                                   f"acl_sync.unmapped.{cluster}: keep"))
        elif is_wildcard(there.principal) or (own is not None and there.principal == own):
            refused.append(Refusal(there, f"on {cluster} it would name "
                                          + ("every principal" if is_wildcard(there.principal)
                                             else "mirrorflow's own principal")))
        else:
            wanted.add(there)
    return Arrival(cluster, frozenset(wanted), tuple(refused))


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
    #: Deletions held back: more than ``max_delete_share`` of mirrorflow's grants there (all of them or none).
    withheld: tuple[Grant, ...] = ()
    #: How many grants mirrorflow had made on the cluster (and still there) when it was planned.
    mine: int = 0
    #: The share one run may delete (``None``: no bound, as for the read-only guard).
    max_delete_share: float | None = None

    def withheld_reason(self) -> str:
        """Why :attr:`withheld` were not deleted (empty when none were held back)."""
        if not self.withheld:
            return ""
        share = self.max_delete_share if self.max_delete_share is not None else 1.0
        empty = (f" (nothing of {self.owner}'s travels here any more: rebuilt, its ACLs not migrated yet, or its "
                 "grants declined?)") if len(self.made) == len(self.withheld) and not self.create else ""
        return (f"{len(self.withheld)} of the {self.mine} grants mirrorflow made on {self.cluster} no longer travel "
                f"from {self.owner}{empty}: more than acl_sync.max_delete_share ({share:g}) in one run, so none is "
                f"deleted; they are {_some([str(g) for g in self.withheld], 2)}")

    def explain(self) -> list[str]:
        return ([f"{self.cluster}: create {g} (as on {self.owner})" for g in self.create]
                + [f"{self.cluster}: delete {g}: no longer travels from {self.owner}, and mirrorflow made it"
                   for g in self.delete]
                + ([f"{self.cluster}: {self.withheld_reason()}"] if self.withheld else []))


def plan_grants(cluster: str, owner: str, wanted: Iterable[Grant], have: Iterable[Grant],
                made: Iterable[Grant], max_delete_share: float | None = None) -> GrantPlan:
    """Create what ``cluster`` lacks of ``wanted``; delete what mirrorflow ``made`` there that is not wanted.

    ``have``: the cluster's bindings now; ``made``: its record. A made grant someone
    deleted by hand is dropped from the record (and, if still wanted, made again).
    ``max_delete_share``: when the deletions would be more than that share of the
    grants mirrorflow made there, none is made (an owner that lost its ACLs would
    otherwise take every follower's with it, in one run).
    """
    wanted, have, made = set(wanted), set(have), set(made)
    mine = made & have
    create = sorted(wanted - have)
    delete = sorted((made - wanted) & have)
    withheld: list[Grant] = []
    if max_delete_share is not None and len(delete) > max_delete_share * len(mine):
        withheld, delete = delete, []
    return GrantPlan(cluster, owner, tuple(create), tuple(delete),
                     frozenset((mine - set(delete)) | set(create)), tuple(sorted((wanted & have) - made)),
                     tuple(withheld), len(mine), max_delete_share)
