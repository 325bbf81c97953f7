"""Comparing the clusters' tallies window by window: what is complete, and what differs where.

The reference for a cell (topic, origin, window) is the origin cluster's own tally:
what it holds of its own messages is what every other cluster must hold, once
each. A cell is judged only when it is final (its window ended more than the grace
period ago: copies still on their way are not a loss) and after every cluster's
horizon (the timestamp of the oldest record it still held when it was first
audited: what a cluster had deleted before then was never counted, so older
windows cannot be compared). Pure: the tallies come from :mod:`mirrorflow.completeness.tally`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from mirrorflow.completeness.tally import Tallies, Tally, WindowKey


@dataclass(frozen=True, order=True)
class Difference:
    """One cluster whose cell differs from the origin's: the counts, as the tallies say them.

    The counts alone cannot say which messages are missing or repeated (two missing and
    one duplicate read as one missing; an equal count with another sum is a different
    message); the drill-down (:mod:`mirrorflow.completeness.drill`) reads the cell's
    messages on both clusters and names them.
    """

    topic: str
    window_ms: int
    origin: str
    cluster: str
    #: Messages of the cell on the origin, and on this cluster.
    expected: int
    held: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """How one cluster's cell compares with its origin's: what is kept per window for the history."""

    expected: int
    held: int
    complete: bool
    #: Records of the cell that compaction explains (a compacted topic's cell complete although the counts differ).
    compacted: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.compacted:
            del out["compacted"]  # as verdicts were stored before compaction was known
        return out


@dataclass(frozen=True)
class Comparison:
    """The judged cells (complete or not) and the differences found among them."""

    judged: int
    complete: int
    differences: tuple[Difference, ...]
    #: Cells not judged yet: their window is within the grace period.
    pending: int
    #: Cells before their origin's horizon: never comparable.
    before_horizon: int
    #: Cells whose origin cluster was not audited in this run (unreachable, or not in the topology).
    no_reference: int = 0
    #: Every judged cell of every cluster but its origin, complete or not: ``(cluster, cell) -> verdict``.
    verdicts: Mapping[tuple[str, WindowKey], Verdict] = field(default_factory=dict)
    #: Records that compaction explains in complete cells of compacted topics (the drill-down decides).
    compacted: int = 0

    @property
    def ok(self) -> bool:
        return not self.differences


def final(window_ms: int, window_s: int, now_ms: int, grace_s: float) -> bool:
    """Whether a window ended more than ``grace_s`` ago."""
    return window_ms + window_s * 1000 + grace_s * 1000 <= now_ms


def compare(tallies: Mapping[str, Tallies], holders: Mapping[str, list[str]], *, now_ms: int, grace_s: float,
            horizons: Mapping[tuple[str, str], int] | None = None) -> Comparison:
    """Compare every cell of every cluster with its origin's.

    ``tallies``: cluster -> its tallies (one window length). ``holders``: topic -> the
    clusters that must hold every message of it (the topology's clusters where the
    topic is mirrored). ``horizons``: (cluster, topic) -> epoch ms before which the
    cluster was never counted (missing: no horizon); a cell is compared on a cluster
    only after both its own and the origin's horizon.
    """
    sizes = {t.window_s for t in tallies.values()}
    if len(sizes) > 1:
        raise ValueError(f"tallies of different window lengths cannot be compared: {sorted(sizes)}")
    window_s = sizes.pop() if sizes else 0
    cells: set[WindowKey] = {key for t in tallies.values() for key in t.cells}
    judged = complete = pending = before = unjudged = 0
    differences: list[Difference] = []
    verdicts: dict[tuple[str, WindowKey], Verdict] = {}
    for key in sorted(cells):
        clusters = holders.get(key.topic, [])
        if not final(key.window_ms, window_s, now_ms, grace_s):
            pending += 1
            continue
        origin = tallies.get(key.origin)
        if origin is None:
            unjudged += 1  # the origin is not audited (not in the topology, or unreachable): nothing to compare with
            continue
        if key.window_ms < (horizons or {}).get((key.origin, key.topic), 0):
            before += 1  # the origin was not counted that far back: no reference
            continue
        judged += 1
        reference = origin.cells.get(key, Tally())
        found = []
        for cluster in clusters:
            if cluster == key.origin or cluster not in tallies:
                continue
            if key.window_ms < (horizons or {}).get((cluster, key.topic), 0):
                continue  # this cluster was not counted that far back
            held = tallies[cluster].cells.get(key, Tally())
            verdicts[(cluster, key)] = Verdict(reference.count, held.count, held == reference)
            if held == reference:
                continue
            found.append(Difference(key.topic, key.window_ms, key.origin, cluster, reference.count, held.count))
        if found:
            differences.extend(found)
        else:
            complete += 1
    return Comparison(judged, complete, tuple(differences), pending, before, unjudged, verdicts)

