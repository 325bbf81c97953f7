"""The SLA verdict: which rows are over the bounds of the topology's ``lag`` settings, in words.

A bound that cannot be shown to hold is not held: a row that was not measured
violates any bound that applies to it, and pending records of unknown age
violate a bound in seconds. Bounds themselves are parsed and combined in
:mod:`mirrorflow.topology.lag`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from mirrorflow.lag.rows import WHOLE, GroupPartitionLag, LinkPartitionLag, Violation, open_transaction
from mirrorflow.topology.lag import Bound, LagConfig


def link_violations(rows: Iterable[LinkPartitionLag], bound_of: Callable[[str], Bound | None],
                    waiting: Collection[str] = ()) -> list[Violation]:
    """Link rows over their bound; a row not measured violates any bound that applies to its link.

    A retention gap, a truncated source or a vanished checkpoint violates whatever
    the bounds: no later copy can repair any of them, so a person must decide.
    ``waiting``: links outside their replication window; their pending records wait by design
    and are held to no bound until the window opens.
    """
    out = []
    for row in rows:
        if row.gap:
            assert row.checkpoint is not None  # a gap is counted from the checkpoint
            out.append(Violation("link", row.where, f"{row.where}: retention gap: offsets {row.checkpoint}.."
                                 f"{row.checkpoint + row.gap - 1} ({row.gap}) were deleted on {row.source} "
                                 f"before the link copied them"))
        if row.truncated:
            out.append(Violation("link", row.where, f"{row.where}: the checkpoint {row.checkpoint} is past the "
                                 f"source's end {row.end}: the source partition was truncated or recreated"))
        if row.checkpoint_missing:
            out.append(Violation("link", row.where, f"{row.where}: the link's checkpoint on {row.target} is gone "
                                 f"(expired, deleted, or the link's id changed): its next level run refuses to "
                                 f"copy, or would copy everything again"))
        bound = bound_of(row.link_id)
        if bound is not None and row.link_id not in waiting:
            out += _over(row, "link", bound)
    return out


def group_violations(rows: Iterable[GroupPartitionLag], bound_of: Callable[[str], Bound | None],
                     any_bound: bool) -> list[Violation]:
    """Group rows over their bound. A cluster whose groups were not measured violates when ``any_bound``."""
    out = []
    for row in rows:
        if row.group == WHOLE:
            if any_bound and row.error:
                out.append(Violation("group", row.where, f"{row.where}: {row.error}"))
            continue
        bound = bound_of(row.group)
        if bound is not None and (row.topic != WHOLE or row.error):
            out += _over(row, "group", bound)
    return out


def _over(row: LinkPartitionLag | GroupPartitionLag, kind: str, bound: Bound) -> list[Violation]:
    if bound.records is None and bound.seconds is None:
        return []
    if row.error:
        return [Violation(kind, row.where, f"{row.where}: {row.error}")]
    if row.records is None:
        return []
    phrases = bound.exceeded(row.records, row.seconds or 0.0)
    if bound.seconds is not None and row.seconds is None:
        # records are pending but their age could not be read: the bound cannot be shown to hold
        phrases.append(f"age unknown ({row.note or 'not read'}) with a bound of {bound.seconds}s")
    if phrases and isinstance(row, LinkPartitionLag) and row.held:
        phrases.append(open_transaction(row))
    return [Violation(kind, row.where, f"{row.where}: {'; '.join(phrases)}")] if phrases else []


def evaluate(config: LagConfig, links: Iterable[LinkPartitionLag], groups: Iterable[GroupPartitionLag],
             waiting: Collection[str] = ()) -> list[Violation]:
    """Every violation of the topology's ``lag`` settings (``sla``, ``links.<id>``, ``groups`` rules).

    ``waiting``: links outside their replication window (held to no lag bound meanwhile).
    """
    out = link_violations(links, config.link_bound, waiting)
    out += group_violations(groups, config.group_bound, any_bound=bool(config.groups))
    return out
