"""Hypothesis strategies for replication windows (tests/unit/test_windows.py, tests/unit/test_replication.py)."""

from __future__ import annotations

from hypothesis import strategies as st

from mirrorflow.topology.windows import Window

ZONES = ("UTC", "Europe/Amsterdam", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata")


@st.composite
def window_times(draw) -> str:
    """``HH:MM-HH:MM``, never empty (an equal start and end becomes an end of 24:00)."""
    h1, m1 = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    h2 = draw(st.integers(0, 24))
    m2 = 0 if h2 == 24 else draw(st.integers(0, 59))
    if (h1, m1) == (h2, m2):
        h2, m2 = 24, 0
    return f"{h1:02d}:{m1:02d}-{h2:02d}:{m2:02d}"


@st.composite
def windows(draw):
    days = draw(st.sampled_from(["", "Mon-Fri ", "Sat,Sun ", "Wed "]))
    return Window.parse(f"{days}{draw(window_times())} {draw(st.sampled_from(ZONES))}")
