"""Whether to start a level run now: records waiting on the level's links, and when the last run was asked for. Pure.

The watcher of an ``on_data`` level (docs/levels.md) measures its links' lag
without reading a message (end offsets and checkpoints only: :func:`link_lag`
with ``ages=False``) and asks :class:`DataWatch` whether that is a reason to start
a run. The rules, each answer saying which one decided:

- nothing waits: no run (and the next records to come are news);
- a run is already queued: no run; it will plan from the offsets it finds then;
- what waits is what the last run was asked for (same offsets): no run, since a
  run is copying it, unless ``resend`` seconds have passed (a run that failed, or
  an event that never became a run);
- less than ``floor`` seconds since the last run was asked for: not yet, so a
  busy topic does not start a run per record;
- what waits, waits only on links or partitions whose runs keep failing and whose
  back-off has not run out (:mod:`mirrorflow.lag.backoff`): no run; records on
  healthy ones are not held back by them;
- otherwise: a run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mirrorflow.lag.backoff import Backoff, Failing
from mirrorflow.lag.rows import LinkPartitionLag

#: Seconds after which records still waiting at the same offsets ask for a run again.
DEFAULT_RESEND_S = 60.0

#: One partition's waiting records: (link, topic, partition, where the copy starts, the source's stable end).
Mark = tuple[str, str, int, int, int]


@dataclass(frozen=True)
class Waiting:
    """What waits on a level's links at one measurement."""

    #: Link id -> records its checkpoint has not passed (up to the source's last stable offset).
    records: dict[str, int] = field(default_factory=dict)
    #: The waiting partitions with their offsets: equal marks mean nothing new since.
    marks: tuple[Mark, ...] = ()
    #: Links that could not be measured, with why.
    unmeasured: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.records.values())


def waiting(rows: Iterable[LinkPartitionLag]) -> Waiting:
    """The records a copy could take now, per link: from the stable end back to the copy's start.

    Records behind an open transaction are not counted (no copy passes them until it
    ends), nor a partition whose checkpoint is past its end (a truncated source: the
    run would stop there by name; starting runs would not help).
    """
    records: dict[str, int] = {}
    marks: list[Mark] = []
    unmeasured: dict[str, str] = {}
    for row in rows:
        if row.error is not None or row.start is None or row.end is None or row.partition is None:
            if row.error is not None:
                unmeasured.setdefault(row.link_id, row.error)
            continue
        if row.end > row.start:
            records[row.link_id] = records.get(row.link_id, 0) + row.end - row.start
            marks.append((row.link_id, row.topic, row.partition, row.start, row.end))
    return Waiting(records, tuple(sorted(marks)), unmeasured)


@dataclass(frozen=True)
class Decision:
    run: bool
    why: str
    #: What changed in the back-off (a link or partition that keeps failing, or copies again): for the log.
    notes: tuple[str, ...] = ()


@dataclass
class DataWatch:
    """The watcher's memory between measurements: when it last asked for a run, and for what."""

    floor_s: float
    resend_s: float = DEFAULT_RESEND_S
    last_at: float | None = None
    last_marks: tuple[Mark, ...] = ()
    backoff: Backoff = field(default_factory=Backoff)

    def decide(self, now: float, found: Waiting, *, queued: int = 0, failing: Failing | None = None) -> Decision:
        """Whether ``found`` (measured at ``now``, epoch seconds) starts a run; remembers it if so.

        ``failing``: what the level's latest finished run failed (its links and partitions back off).
        """
        notes = tuple(self.backoff.observe(failing, now))
        if found.total == 0:
            self.last_marks = ()
            return Decision(False, "nothing waits", notes)
        if queued > 0:
            return Decision(False, f"{found.total} records wait; a run is already queued", notes)
        left = {m: self.backoff.holds(m[0], m[1], m[2], now) for m in found.marks}
        due = tuple(m for m in found.marks if left[m] == 0)
        if not due:
            return Decision(False, f"{found.total} records wait, only on links or partitions whose runs keep "
                                   f"failing; the next retry in {min(left.values()):.0f}s", notes)
        since = None if self.last_at is None else now - self.last_at
        if due == self.last_marks and since is not None and since < self.resend_s:
            return Decision(False, f"{found.total} records wait, as when the last run was asked for {since:.1f}s ago",
                            notes)
        if since is not None and since < self.floor_s:
            return Decision(False, f"{found.total} records wait; the last run was asked for {since:.1f}s ago "
                                   f"(floor {self.floor_s:g}s)", notes)
        self.last_at, self.last_marks = now, due
        self.backoff.asked(now)
        records: dict[str, int] = {}
        for link, _, _, start, end in due:
            records[link] = records.get(link, 0) + end - start
        links = ", ".join(f"{link} {n}" for link, n in sorted(records.items()))
        held = found.total - sum(records.values())
        return Decision(True, f"{sum(records.values())} records wait ({links})"
                              + (f"; {held} more on failing partitions, retried with them" if held else ""), notes)
