"""Read-only clusters (``acl_sync.read_only``): every writer of a mirrored topic there denied, but mirrorflow.

Pure; :mod:`mirrorflow.cluster_sync.acl_sync` reads and writes the clusters.

A standby in active-passive use must not fork the data: a producer sent there by
mistake should fail at once. Kafka's authorizer lets a DENY beat any ALLOW, so the
guard is one ``DENY <principal> WRITE`` per mirrored topic for each principal that
an ALLOW ``WRITE`` or ``ALL`` binding lets write it (literal, prefixed or ``*``).
It cannot be a single DENY for ``User:*``: that would deny mirrorflow's own
principal too. So a wildcard writer (``User:*``) cannot be guarded against, and is
named instead; a principal with no ALLOW cannot write anyway.

A failover of consumer groups to the cluster *lifts* the guard for their topics
(the applications move there); a failover of the same groups away from it re-arms
it. Which topics are lifted, for which groups, is recorded on the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mirrorflow.cluster_sync.acl_plan import WRITING, Grant

#: The ``owner`` a guard's plan names (for journal lines and reports): no cluster, the rule itself.
GUARD = "read-only guard"


def covers(grant: Grant, topic: str) -> bool:
    """Whether topic binding ``grant`` applies to ``topic``."""
    if grant.resource_type != "TOPIC":
        return False
    if grant.pattern_type == "LITERAL":
        return grant.name in (topic, "*")
    return grant.pattern_type == "PREFIXED" and topic.startswith(grant.name)


def deny(principal: str, topic: str) -> Grant:
    """The guard's binding: ``principal`` may not write ``topic``, from any host."""
    return Grant("TOPIC", topic, "LITERAL", principal, "*", "WRITE", "DENY")


@dataclass(frozen=True)
class Guard:
    """What the guard wants on one cluster: its DENY bindings, and the writers it cannot deny (why, each)."""

    cluster: str
    denies: frozenset[Grant]
    unguarded: tuple[str, ...] = ()
    #: Mirrored topics the guard leaves open: lifted by a failover, for these groups.
    lifted: Mapping[str, frozenset[str]] | None = None

    def explain(self) -> list[str]:
        return ([f"{self.cluster}: {g}: read-only, only mirrorflow writes {g.name!r} here" for g in sorted(self.denies)]
                + [f"{self.cluster}: {t!r} open to writers: lifted by the failover of {', '.join(sorted(gs))}"
                   for t, gs in sorted((self.lifted or {}).items())]
                + list(self.unguarded))


def plan_guard(cluster: str, topics: Iterable[str], have: Iterable[Grant], own: Iterable[str],
               lifted: Mapping[str, frozenset[str]] | None = None) -> Guard:
    """The DENY bindings that make ``topics`` on ``cluster`` read-only to all but mirrorflow's principals ``own``.

    ``topics``: the mirrored topics the cluster has; ``have``: its bindings now;
    ``lifted``: topics a failover opened (left out, and said).
    """
    topics, own, lifted = set(topics), set(own), dict(lifted or {})
    guarded = sorted(topics - set(lifted))
    denies: set[Grant] = set()
    unguarded: list[str] = []
    for grant in sorted(have):
        if grant.permission != "ALLOW" or grant.operation not in WRITING or grant.principal in own:
            continue
        for topic in (t for t in guarded if covers(grant, t)):
            if grant.principal.endswith(":*"):
                unguarded.append(f"{cluster}: {grant} lets every principal write {topic!r}, and a DENY for "
                                 f"{grant.principal} would deny mirrorflow too: the read-only guard cannot close "
                                 f"it; grant WRITE to named principals instead")
            else:
                denies.add(deny(grant.principal, topic))
    return Guard(cluster, frozenset(denies), tuple(unguarded),
                 {t: gs for t, gs in lifted.items() if t in topics})
