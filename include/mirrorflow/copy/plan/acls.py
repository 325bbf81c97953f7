"""Syncing topic ACLs (``acl_sync``): each target brought in line with the owner's travelling ACLs once per plan.

The owner's ACLs are read once (:class:`mirrorflow.cluster_sync.acl_sync.GrantOwner`, which
also guards a read-only cluster); a target is synced when its first link is shaped,
and what was done is told once, on that first link's report, not on each link of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mirrorflow.cluster_sync import GrantOwner, GrantResult
from mirrorflow.copy.spec import JobSpec, LinkReport
from mirrorflow.errors import ClusterUnreachable


def grant_owner(spec: JobSpec, closed: Mapping[str, ClusterUnreachable] | None = None,
                timeout: float = 30.0) -> GrantOwner | None:
    """The owner of the travelling topic ACLs and the read-only guard (``spec.acl_sync``), one plan's worth;
    ``None``: ACLs stay as they are."""
    rules = spec.grant_rules()
    if rules is None:
        return None
    down = (closed or {}).get(rules.owner)
    return GrantOwner(rules, {c: spec.client(c) for c in spec.clusters}, timeout,
                      unread=str(down) if down is not None else None)


class AclSync:
    """One plan's ACL sync: each target synced once, what was done kept until it is told."""

    def __init__(self, spec: JobSpec, closed: Mapping[str, ClusterUnreachable]) -> None:
        self._spec = spec
        self._owner = grant_owner(spec, closed)
        self._synced: dict[str, GrantResult] = {}

    def sync(self, target: str) -> None:
        """Bring ``target``'s topic ACLs in line with the owner's, the first time one of its links asks."""
        if self._owner is not None and target not in self._synced:
            self._synced[target] = self._owner.sync(self._spec.client(target))

    def tell(self, reports: Iterable[LinkReport]) -> None:
        """Write each target's sync on the first of its links' reports (in the spec's order of links)."""
        for report in reports:
            result = self._synced.pop(report.target, None)
            if result is not None:
                report.acls_created = [str(g) for g in result.created]
                report.acls_deleted = [str(g) for g in result.deleted]
                report.acl_problems = list(result.problems)
                report.declined += [d.to_dict() for d in result.declined]
