"""Replication windows in a time zone and on chosen days, with fixed clocks (mirrorflow.topology.windows).

Europe/Amsterdam moves its clocks on 2026-03-29 (02:00 CET -> 03:00 CEST, at 01:00 UTC)
and 2026-10-25 (03:00 CEST -> 02:00 CET, at 01:00 UTC); America/New_York on 2026-03-08
(02:00 EST -> 03:00 EDT, at 07:00 UTC).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorflow.topology.windows import Window, next_opening, window_closes, window_open
from tests.unit.strategies import windows

AMS = ZoneInfo("Europe/Amsterdam")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def span_on(window: Window, day: datetime) -> tuple[datetime, datetime]:
    """The window's span that opens on ``day`` (its zone's date)."""
    return next(s for s in window.spans(day) if s[0].astimezone(ZoneInfo(window.zone)).date() == day.date())


def test_a_zone_moves_the_window_with_the_seasons():
    w = Window.parse("22:00-06:00 Europe/Amsterdam")
    assert (w.zone, w.text) == ("Europe/Amsterdam", "22:00-06:00 Europe/Amsterdam")
    assert span_on(w, datetime(2026, 1, 15, 12, tzinfo=AMS)) == (utc(2026, 1, 15, 21), utc(2026, 1, 16, 5))
    assert span_on(w, datetime(2026, 7, 15, 12, tzinfo=AMS)) == (utc(2026, 7, 15, 20), utc(2026, 7, 16, 4))
    assert window_open([w], utc(2026, 1, 15, 21, 30)) and not window_open([w], utc(2026, 1, 15, 20, 30))
    assert window_open([w], utc(2026, 7, 15, 20, 30)) and not window_open([w], utc(2026, 7, 16, 4, 30))


def test_the_night_the_clocks_jump_forward_is_an_hour_shorter():
    w = Window.parse("22:00-06:00 Europe/Amsterdam")
    opens, closes = span_on(w, datetime(2026, 3, 28, 12, tzinfo=AMS))
    assert (opens, closes) == (utc(2026, 3, 28, 21), utc(2026, 3, 29, 4)) and closes - opens == timedelta(hours=7)


def test_the_night_the_clocks_fall_back_is_an_hour_longer():
    w = Window.parse("22:00-06:00 Europe/Amsterdam")
    opens, closes = span_on(w, datetime(2026, 10, 24, 12, tzinfo=AMS))
    assert (opens, closes) == (utc(2026, 10, 24, 20), utc(2026, 10, 25, 5)) and closes - opens == timedelta(hours=9)


def test_a_start_the_clock_skips_opens_at_the_jump():
    w = Window.parse("02:30-04:00 Europe/Amsterdam")
    assert span_on(w, datetime(2026, 3, 29, 12, tzinfo=AMS)) == (utc(2026, 3, 29, 1), utc(2026, 3, 29, 2))
    assert not window_open([w], utc(2026, 3, 29, 0, 59, 59)) and window_open([w], utc(2026, 3, 29, 1))


def test_an_end_the_clock_skips_closes_at_the_jump():
    w = Window.parse("01:00-02:30 Europe/Amsterdam")
    assert span_on(w, datetime(2026, 3, 29, 12, tzinfo=AMS)) == (utc(2026, 3, 29, 0), utc(2026, 3, 29, 1))
    assert window_closes([w], utc(2026, 3, 29, 0, 30)) == utc(2026, 3, 29, 1)


def test_a_window_inside_the_skipped_hour_does_not_open_that_day():
    w = Window.parse("Sun 02:15-02:45 America/New_York")
    skipped = datetime(2026, 3, 8, 12, tzinfo=ZoneInfo("America/New_York"))
    assert all(opens.date() != skipped.date() for opens, _ in w.spans(skipped))
    assert not any(window_open([w], utc(2026, 3, 8, 6) + timedelta(minutes=m)) for m in range(0, 180, 5))
    assert next_opening([w], utc(2026, 3, 8, 6)) == utc(2026, 3, 15, 6, 15)  # a week later, EDT


def test_a_time_the_clock_shows_twice_counts_at_its_first_showing():
    w = Window.parse("02:30-04:00 Europe/Amsterdam")
    # 02:30 CEST = 00:30 UTC; 04:00 CET = 03:00 UTC
    assert span_on(w, datetime(2026, 10, 25, 12, tzinfo=AMS)) == (utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 3))


def test_days_name_the_day_a_window_opens_in_its_zone():
    w = Window.parse("Mon-Fri 22:00-06:00 Europe/Amsterdam")
    friday_night = datetime(2026, 11, 27, 23, tzinfo=AMS)      # a Friday: opened today
    saturday_morning = datetime(2026, 11, 28, 5, tzinfo=AMS)   # still Friday's window
    saturday_night = datetime(2026, 11, 28, 23, tzinfo=AMS)    # no window opens on Saturday
    assert window_open([w], friday_night) and window_open([w], saturday_morning)
    assert not window_open([w], saturday_night)
    assert window_closes([w], saturday_morning) == datetime(2026, 11, 28, 6, tzinfo=AMS)
    assert next_opening([w], saturday_night) == datetime(2026, 11, 30, 22, tzinfo=AMS)  # Monday


@pytest.mark.parametrize("text, days", [
    ("Mon-Fri 08:00-09:00", {0, 1, 2, 3, 4}),
    ("Fri-Mon 08:00-09:00", {4, 5, 6, 0}),          # a range wraps over the week's end
    ("sat,SUN 08:00-09:00", {5, 6}),
    ("Mon,Wed-Thu 08:00-09:00 UTC", {0, 2, 3}),
    ("Sun-Sun 08:00-09:00", {6}),
])
def test_days(text, days):
    assert Window.parse(text).days == frozenset(days)


@pytest.mark.parametrize("text, problem", [
    ("Mon-Fry 22:00-06:00", "'Fry' is not a day"),
    ("Monday 22:00-06:00", "'Monday' is not a day"),
    ("Mon, 22:00-06:00", "'' is not a day"),
    ("Mon,,Tue 22:00-06:00", "'' is not a day"),
    ("22:00-06:00 Mars/Olympus", "'Mars/Olympus' is not a time zone"),
    ("22:00-06:00 CEST", "'CEST' is not a time zone"),
])
def test_bad_days_and_zones_are_named(text, problem):
    with pytest.raises(ValueError, match="window") as caught:
        Window.parse(text)
    assert problem in str(caught.value)


def test_window_closes_joins_windows_that_touch_and_is_none_outside_or_never():
    ws = [Window.parse("20:00-22:00"), Window.parse("22:00-23:00")]
    assert window_closes(ws, utc(2026, 1, 5, 21)) == utc(2026, 1, 5, 23)
    assert window_closes(ws, utc(2026, 1, 5, 23, 30)) is None
    assert window_closes(None, utc(2026, 1, 5, 21)) is None
    assert window_closes([Window.parse("00:00-24:00 Europe/Amsterdam")], utc(2026, 3, 29, 1)) is None
    assert window_closes([Window.parse("Mon-Fri 00:00-24:00")], utc(2026, 1, 5, 21)) == utc(2026, 1, 10)


moments = st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31), timezones=st.just(UTC))


@settings(max_examples=300, deadline=None)
@given(ws=st.lists(windows(), min_size=1, max_size=2), now=moments)
def test_open_closes_and_next_opening_agree(ws, now):
    closes = window_closes(ws, now)
    if window_open(ws, now) and closes is None:  # open all the time
        assert all(window_open(ws, now + timedelta(hours=h)) for h in range(0, 24 * 7, 5))
    elif window_open(ws, now):
        assert closes > now
        assert window_open(ws, closes - timedelta(microseconds=1)) and not window_open(ws, closes)
    else:
        assert closes is None
        nxt = next_opening(ws, now)
        assert nxt > now and window_open(ws, nxt) and not window_open(ws, nxt - timedelta(microseconds=1))
