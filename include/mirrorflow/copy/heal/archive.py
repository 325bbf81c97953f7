"""Healing a retention gap from the S3 archive: ``on_gap: restore``, and ``mirror_resolve_gap``'s ``restore``.

A link's source lost offsets ``[position, earliest)`` before the link copied
them. Each archived cluster keeps its own archive, keyed by its own offsets
(mirrorflow.archive.layout), so the source's archive holds exactly those
offsets. A heal hands them to the copier in place of Kafka
(:meth:`mirrorflow.copy.engine.partition._PartitionCopy.restore`): the same copy
flags, provenance, transactions and checkpoint, and the copy goes on from Kafka
at ``earliest``. A killed heal resumes at its checkpoint like any copy.

Nothing is restored unless the archive holds the whole gap: a partial restore
would leave a hole that looks healed. :func:`plan_heal` is the rule (pure) and
names what is missing; :func:`heal_plans` reads the archive's coverage once per
source cluster. Where the source's archive falls short and other clusters are
archived, the copier looks for the gap's messages there by provenance
(:mod:`mirrorflow.copy.heal.origin`), and stops naming what no archive proves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

Range = tuple[int, int]


def ranges_text(ranges: Iterable[Range]) -> str:
    """``[(0, 10), (15, 16)]`` as ``0..9, 15``: inclusive, as operators read offsets."""
    return ", ".join(f"{a}..{b - 1}" if b - a > 1 else f"{a}" for a, b in ranges)


@dataclass(frozen=True)
class Heal:
    """What the archive of ``source`` can restore of one partition's gap ``[position, earliest)``."""

    source: str
    topic: str
    partition: int
    position: int
    earliest: int
    #: The archive's ranges ``[first, next)`` inside the gap.
    covered: tuple[Range, ...]
    #: The gap's ranges ``[first, next)`` the archive does not hold.
    missing: tuple[Range, ...]
    #: Why nothing can be looked up (no archive configured, the source is not archived).
    unavailable: str | None = None
    #: The source's archive falls short: other archived clusters to look in by provenance.
    by_origin: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether a restore is planned: from the source's archive, or by provenance from the others."""
        return (not self.missing and self.unavailable is None) or bool(self.by_origin)

    @property
    def missing_offsets(self) -> int:
        return sum(b - a for a, b in self.missing)

    @property
    def where(self) -> str:
        return f"{self.source} {self.topic}[{self.partition}]"

    @property
    def why(self) -> str:
        """A sentence for logs and errors: what is restored, or exactly what is missing."""
        gap = ranges_text([(self.position, self.earliest)])
        if self.by_origin:
            short = (self.unavailable if self.unavailable is not None
                     else f"the archive of {self.source} does not hold {ranges_text(self.missing)}")
            return (f"retention gap: offsets {gap} ({self.earliest - self.position}) are no longer on {self.where} "
                    f"and {short}: what the link copies of them is looked for by provenance in the archives of "
                    f"{', '.join(self.by_origin)}")
        if self.unavailable is not None:
            return (f"retention gap: offsets {gap} ({self.earliest - self.position}) are no longer on {self.where} "
                    f"and cannot be restored: {self.unavailable}; the partition stops at {self.position}")
        if self.ok:
            return (f"retention gap: offsets {gap} ({self.earliest - self.position}) are no longer on {self.where}; "
                    f"restored from the archive of {self.source}")
        held = ranges_text(self.covered) if self.covered else "none of them"
        return (f"retention gap: offsets {ranges_text(self.missing)} ({self.missing_offsets}) of {self.where} are in "
                f"no archive (the archive of {self.source} holds {held} of the lost {gap}); nothing restored, the "
                f"partition stops at {self.position} (mirror_resolve_gap with skip steps over the gap, recording "
                f"the loss)")

    def restore(self, location: Mapping[str, Any]) -> dict[str, Any]:
        """The copier's ``PartitionTask.restore``: read ``[position, earliest)`` from the archive."""
        out: dict[str, Any] = {"location": dict(location), "end": self.earliest}
        if self.by_origin:
            out["by_origin"] = list(self.by_origin)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "topic": self.topic, "partition": self.partition,
                "lost": [self.position, self.earliest - 1], "restorable": self.ok,
                "archived": [[a, b - 1] for a, b in self.covered], "missing": [[a, b - 1] for a, b in self.missing],
                "unavailable": self.unavailable, "by_origin": list(self.by_origin)}


def plan_heal(source: str, topic: str, partition: int, position: int, earliest: int,
              coverage: Iterable[Range]) -> Heal:
    """What of ``[position, earliest)`` the archive's ``coverage`` (``[first, next)`` ranges) holds, and what not."""
    covered: list[Range] = []
    missing: list[Range] = []
    at = position
    for first, nxt in sorted(coverage):
        first, nxt = max(first, position), min(nxt, earliest)
        if first >= nxt or nxt <= at:
            continue
        if first > at:
            missing.append((at, first))
        covered.append((max(first, at), nxt))
        at = nxt
    if at < earliest:
        missing.append((at, earliest))
    return Heal(source, topic, partition, position, earliest, tuple(covered), tuple(missing))


def unavailable(source: str, topic: str, partition: int, position: int, earliest: int, reason: str) -> Heal:
    return Heal(source, topic, partition, position, earliest, (), ((position, earliest),), reason)


def heal_plans(location: Mapping[str, Any] | None, archived: Sequence[str], source: str,
               gaps: Mapping[tuple[str, int], Range]) -> dict[tuple[str, int], Heal]:
    """Per ``(topic, partition)``: what the archive of ``source`` restores of its gap ``(position, earliest)``.

    ``location``: the archive's (``ArchiveLocation.to_dict()``; ``None``: none is
    configured); ``archived``: the archived clusters. Where the source's archive
    falls short, the others are named for a restore by provenance. The
    manifests are read once for all the gaps.
    """
    if not gaps:
        return {}
    others = tuple(c for c in archived if c != source)
    if location is None or source not in archived:
        reason = (f"{source} is not archived (topology key archive.clusters)" if location is not None
                  else "no archive is configured (topology key archive, and its Airflow AWS connection)")
        return {tp: replace(unavailable(source, tp[0], tp[1], pos, low, reason),
                            by_origin=others if location is not None else ())
                for tp, (pos, low) in gaps.items()}
    from mirrorflow.archive import ArchiveLocation, coverages  # driver side only: boto3 and pyarrow

    held = coverages(ArchiveLocation.from_dict(location, where="archive"), source, list(gaps))
    plans = {tp: plan_heal(source, tp[0], tp[1], pos, low, held[tp]) for tp, (pos, low) in gaps.items()}
    return {tp: heal if heal.ok or not others else replace(heal, by_origin=others) for tp, heal in plans.items()}
