"""The copier's byte-rate cap, on a fake clock: it waits exactly as long as the cap asks, never longer."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirrorflow.copy.engine.throttle import RateLimiter


class FakeTime:
    """A clock that only moves when the limiter sleeps or the test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0, f"negative sleep {seconds}"
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


def limiter(rate: float, start: float = 1000.0) -> tuple[RateLimiter, FakeTime]:
    fake = FakeTime(start)
    return RateLimiter(rate, clock=fake.clock, sleep=fake.sleep), fake


def test_no_wait_under_the_rate():
    rl, fake = limiter(1000)
    for _ in range(50):
        fake.advance(0.1)
        assert rl.acquire(100) == 0.0      # exactly the rate: 100 every 0.1 s
    assert fake.sleeps == [] and rl.waited == 0.0


def test_burst_of_one_second():
    rl, fake = limiter(1000)
    assert rl.acquire(600) == 0.0
    assert rl.acquire(400) == 0.0            # a full second's worth at once is allowed
    assert rl.acquire(100) == pytest.approx(0.1)
    assert fake.sleeps == [pytest.approx(0.1)]


def test_idle_time_does_not_bank_more_than_one_second():
    rl, fake = limiter(1000)
    fake.advance(3600)
    assert rl.acquire(1000) == 0.0
    assert rl.acquire(500) == pytest.approx(0.5)


def test_a_single_acquire_larger_than_the_rate_waits_proportionally():
    rl, fake = limiter(100)
    assert rl.acquire(500) == pytest.approx(4.0)   # 100 from the burst, 400 more at 100/s
    assert fake.now == pytest.approx(1004.0)
    rl2, _ = limiter(100)
    assert rl2.acquire(1100) == pytest.approx(10.0)
    # after the wait the bucket is empty: the next unit waits its own share
    assert rl.acquire(50) == pytest.approx(0.5)


def test_waited_accumulates():
    rl, fake = limiter(10)
    delays = [rl.acquire(n) for n in (10, 5, 20, 1)]
    assert delays == [0.0, pytest.approx(0.5), pytest.approx(2.0), pytest.approx(0.1)]
    assert rl.waited == pytest.approx(2.6) == pytest.approx(sum(fake.sleeps))


def test_returns_the_wait_it_slept_and_sleeps_only_when_needed():
    rl, fake = limiter(4)
    for pause, amount in [(0.25, 3), (0.0, 3), (0.0, 0), (2.0, 3), (0.0, 3)]:
        fake.advance(pause)
        before = len(fake.sleeps)
        delay = rl.acquire(amount)
        if delay == 0.0:
            assert len(fake.sleeps) == before
        else:
            assert fake.sleeps[before:] == [delay]
    assert len(fake.sleeps) == 2


@pytest.mark.parametrize("rate", [0, -1, -0.5, 0.0, -math.inf])
def test_invalid_rate_is_refused(rate):
    with pytest.raises(ValueError, match="rate must be positive"):
        RateLimiter(rate, clock=lambda: 0.0, sleep=lambda s: None)


def test_fractional_rates_work():
    rl, _ = limiter(0.5)           # one unit every two seconds
    assert rl.acquire(1) == pytest.approx(1.0)   # burst is half a unit
    assert rl.acquire(1) == pytest.approx(2.0)


@settings(max_examples=300, deadline=None)
@given(
    rate=st.integers(1, 10_000_000),
    steps=st.lists(st.tuples(st.integers(0, 20_000_000), st.floats(0, 2.0)), min_size=1, max_size=200),
)
def test_average_rate_never_exceeds_the_cap(rate, steps):
    """Whatever the amounts and the pauses between them, units taken by time t <= rate * (t - t0) + one burst."""
    rl, fake = limiter(rate)
    t0 = fake.now
    taken = 0
    for amount, pause in steps:
        fake.advance(pause)
        before = fake.now
        delay = rl.acquire(amount)
        taken += amount
        assert fake.now == pytest.approx(before + delay)
        elapsed = fake.now - t0
        assert taken <= rate * elapsed + rate + 1e-6 * max(1, taken), (
            f"{taken} units in {elapsed:.3f}s exceeds {rate}/s plus a one-second burst")
    assert rl.waited == pytest.approx(sum(fake.sleeps))


@settings(max_examples=200, deadline=None)
@given(rate=st.integers(1, 1_000_000), amounts=st.lists(st.integers(1, 100_000), min_size=50, max_size=300))
def test_back_to_back_long_sequence_runs_at_the_cap(rate, amounts):
    """With no pauses the copier is throttled to the cap: the total time is (total - burst) / rate, no more."""
    rl, fake = limiter(rate)
    t0 = fake.now
    for amount in amounts:
        rl.acquire(amount)
    total = sum(amounts)
    expected = max(0.0, (total - rate) / rate)
    assert fake.now - t0 == pytest.approx(expected, rel=1e-6, abs=1e-9)
    if fake.now > t0:
        assert total / (fake.now - t0 + 1) <= rate * (1 + 1e-9)   # average over the run, the burst second included
