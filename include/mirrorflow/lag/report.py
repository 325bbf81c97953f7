"""Rows as fixed-width tables, for task logs and sensor failures (plain text reads the same everywhere)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mirrorflow.lag.rows import GroupPartitionLag, LinkPartitionLag


def link_table(rows: Iterable[LinkPartitionLag], *, only_lagging: bool = False, limit: int | None = None) -> str:
    """A fixed-width table of link rows for task logs and sensor failures."""
    header = ("link", "source", "target", "topic", "part", "records", "seconds", "checkpoint", "end", "note")
    body = [(r.link_id, r.source, r.target, r.topic, "" if r.partition is None else str(r.partition),
             "-" if r.records is None else str(r.records), _secs(r.seconds),
             "-" if r.checkpoint is None else str(r.checkpoint), "-" if r.end is None else str(r.end),
             r.error or r.note or "")
            for r in rows if not only_lagging or r.error or r.records]
    return _table(header, body, limit)


def group_table(rows: Iterable[GroupPartitionLag], *, only_lagging: bool = False, limit: int | None = None) -> str:
    """A fixed-width table of group rows for task logs and sensor failures."""
    header = ("cluster", "group", "state", "members", "topic", "part", "records", "seconds", "committed", "end",
              "note")
    body = [(r.cluster, r.group, r.state or "-", "-" if r.members is None else str(r.members), r.topic,
             "" if r.partition is None else str(r.partition), "-" if r.records is None else str(r.records),
             _secs(r.seconds), "-" if r.committed is None else str(r.committed), "-" if r.end is None else str(r.end),
             r.error or r.note or "")
            for r in rows if not only_lagging or r.error or r.records]
    return _table(header, body, limit)


def _table(header: tuple[str, ...], body: Sequence[tuple[str, ...]], limit: int | None) -> str:
    if not body:
        return "(no rows)"
    more = 0
    if limit is not None and len(body) > limit:
        body, more = body[:limit], len(body) - limit
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *body]]
    if more:
        lines.append(f"... {more} more rows")
    return "\n".join(lines)


def _secs(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"
