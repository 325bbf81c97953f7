"""Window ends: when a link's copy must stop taking records, carried into each of its tasks (``stop_at``).

A link closed when its run plans is left out of the run (:mod:`mirrorflow.topology.routes`);
one whose window closes while it copies stops there, committed, and the next window goes
on (the zone and day arithmetic is :mod:`mirrorflow.topology.windows`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from mirrorflow.copy.spec import LinkJob
from mirrorflow.topology.windows import window_closes, window_open


def window_end(link: LinkJob) -> float | None:
    """When the link's copy must stop taking records (epoch seconds): its window's end, or now if it is
    already closed (it closed between the run's start and this plan); ``None`` without windows."""
    if not link.windows:
        return None
    windows, now = link.parsed_windows(), datetime.now(UTC)
    closes = window_closes(windows, now)
    if closes is not None:
        return closes.timestamp()
    return None if window_open(windows, now) else now.timestamp()
