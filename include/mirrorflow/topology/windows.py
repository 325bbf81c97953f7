"""Replication windows: when a link may copy, in wall-clock time of a zone, on chosen days.

A window reads ``[DAYS ]HH:MM-HH:MM[ ZONE]``::

    22:00-06:00                          every night, UTC
    22:00-06:00 Europe/Amsterdam         every night, Amsterdam time
    Mon-Fri 19:00-07:00 America/New_York weekday evenings (a window belongs to the day it opens)
    Sat,Sun 00:00-24:00                  all weekend, UTC

``end <= start`` crosses midnight. The zone is an IANA name (UTC when none is
given). Days are three-letter English names, single or as ranges (``Fri-Mon``
wraps), and name the days the window *opens* on, in its zone.

Daylight saving: a wall time the clock skips (02:30 on the night it jumps from
02:00 to 03:00) is taken as the jump itself, so a window opening then opens at
the jump and one closing then closes at it; a wall time the clock shows twice
(02:30 on the night it falls back) counts at its first showing. A window's
opening and closing are always instants in UTC; every function here takes any
aware ``datetime`` (a naive one is UTC) and answers in UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: How a window is written, for error messages.
WINDOW_FORMAT = "[DAYS ]HH:MM-HH:MM[ ZONE], e.g. 22:00-06:00 or Mon-Fri 22:00-06:00 Europe/Amsterdam"

_TIMES = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]|24):([0-5]\d)$")
DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_EVERY_DAY = frozenset(range(7))


@cache
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _days(spec: str, text: str) -> frozenset[int]:
    """``Mon-Fri``, ``Sat,Sun``, ``Mon,Wed-Fri``, ``Fri-Mon`` (wraps) as weekday numbers (Monday 0)."""
    index = {name.lower(): i for i, name in enumerate(DAY_NAMES)}
    days: set[int] = set()
    for item in spec.split(","):
        first, dash, last = item.partition("-")
        names = [first, last] if dash else [first]
        unknown = [n for n in names if n.lower() not in index]
        if unknown or not item:
            raise ValueError(f"window {text!r}: {unknown[0] if unknown and unknown[0] else item!r} is not a day; "
                             f"use {', '.join(DAY_NAMES)}, single or as ranges (Mon-Fri)")
        start = index[first.lower()]
        stop = index[last.lower()] if dash else start
        days.update((start + k) % 7 for k in range((stop - start) % 7 + 1))
    return frozenset(days)


@dataclass(frozen=True)
class Window:
    """A replication window (module doc): ``start`` to ``end`` wall-clock time in ``zone``, opening on ``days``."""

    start: time
    end: time
    text: str
    zone: str = "UTC"
    days: frozenset[int] = field(default=_EVERY_DAY)

    @classmethod
    def parse(cls, text: str) -> Window:
        parts = text.split()
        at = [i for i, part in enumerate(parts) if _TIMES.fullmatch(part)]
        if len(at) != 1 or at[0] > 1 or len(parts) - at[0] > 2:
            raise ValueError(f"window {text!r} is not {WINDOW_FORMAT}")
        before, times, after = parts[:at[0]], parts[at[0]], parts[at[0] + 1:]
        match = _TIMES.fullmatch(times)
        assert match is not None
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        if h2 == 24 and m2 != 0:
            raise ValueError(f"window {text!r}: 24:MM is only valid as 24:00")
        start = time(h1, m1)
        end = time(0, 0) if h2 == 24 else time(h2, m2)
        if start == end and h2 != 24:
            raise ValueError(f"window {text!r} is empty (start equals end); omit windows to copy all day")
        days = _days(before[0], text) if before else _EVERY_DAY
        zone = after[0] if after else "UTC"
        try:
            _zone(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"window {text!r}: {zone!r} is not a time zone; name one the IANA way "
                             f"(Europe/Amsterdam, America/New_York) or UTC") from None
        return cls(start, end, " ".join(parts), zone, days)

    def _instant(self, day: date, wall: time) -> datetime:
        """The UTC instant the zone's clock shows ``wall`` on ``day`` (module doc: skipped and repeated times)."""
        tz = _zone(self.zone)
        local = datetime.combine(day, wall, tzinfo=tz)  # fold 0: the first showing of a repeated time
        instant = local.astimezone(UTC)
        if instant.astimezone(tz).replace(tzinfo=None) == local.replace(tzinfo=None):
            return instant
        # Skipped: the jump lies after the time read with the later offset and at or before this one.
        low = int(local.replace(fold=1).astimezone(UTC).timestamp())
        high = int(instant.timestamp())
        after = instant.astimezone(tz).utcoffset()
        while low + 1 < high:
            middle = (low + high) // 2
            if datetime.fromtimestamp(middle, tz).utcoffset() == after:
                high = middle
            else:
                low = middle
        return datetime.fromtimestamp(high, UTC)

    def spans(self, now: datetime, before: int = 2, ahead: int = 8) -> list[tuple[datetime, datetime]]:
        """The window's (opening, closing) instants in UTC for the days it opens on around ``now``."""
        today = _utc(now).astimezone(_zone(self.zone)).date()
        out = []
        for k in range(-before, ahead + 1):
            day = today + timedelta(days=k)
            if day.weekday() in self.days:
                closes_on = day if self.end > self.start else day + timedelta(days=1)
                opens, closes = self._instant(day, self.start), self._instant(closes_on, self.end)
                if closes > opens:  # a window inside a skipped hour does not open that day
                    out.append((opens, closes))
        return out


def _utc(now: datetime) -> datetime:
    """``now`` in UTC; a naive datetime is taken to be UTC already."""
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


def window_open(windows: list[Window] | None, now: datetime) -> bool:
    """Whether copying is allowed at ``now``: no windows means always."""
    if not windows:
        return True
    now = _utc(now)
    return any(opens <= now < closes for w in windows for opens, closes in w.spans(now, ahead=0))


def next_opening(windows: list[Window], now: datetime) -> datetime:
    """The next moment after ``now`` at which one of ``windows`` opens (UTC)."""
    now = _utc(now)
    return min(opens for w in windows for opens, _ in w.spans(now, before=1) if opens > now)


def window_closes(windows: list[Window] | None, now: datetime) -> datetime | None:
    """When copying stops being allowed, from ``now`` on: the end of the open stretch ``now`` is in.

    Windows that overlap or touch make one stretch. ``None`` with no windows, when the
    stretch does not end within a week (``00:00-24:00``: always open), or when ``now`` is
    outside every window.
    """
    if not windows:
        return None
    now = _utc(now)
    spans = sorted(span for w in windows for span in w.spans(now))
    if not any(opens <= now < closes for opens, closes in spans):
        return None
    end = now
    for opens, closes in spans:
        if opens <= end:
            end = max(end, closes)
    return None if end >= spans[-1][1] else end  # still open at the last day looked at: it never closes
