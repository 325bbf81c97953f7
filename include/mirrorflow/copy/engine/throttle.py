"""A byte-rate cap for one copier: a token bucket that makes the copier wait, never drop.

A link's ``max_bytes_per_second`` is shared by the partitions of the link that
can run at the same time (the planner divides it); each copier holds its share
here. Waiting happens between messages, inside the open transaction, so the
copier also commits on elapsed time (see ``PartitionTask.txn_max_seconds``) to
stay well inside ``transaction.timeout.ms``.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class RateLimiter:
    """At most ``rate`` units per second on average, with a burst of one second's worth."""

    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not rate > 0:  # also refuses NaN
            raise ValueError(f"rate must be positive, got {rate}")
        self.rate = float(rate)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.rate
        self._last = clock()
        self.waited = 0.0

    def acquire(self, amount: int) -> float:
        """Take ``amount`` units, waiting as long as the cap requires; returns the seconds waited."""
        now = self._clock()
        self._tokens = min(self.rate, self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= amount
        if self._tokens >= 0:
            return 0.0
        delay = -self._tokens / self.rate
        self._sleep(delay)  # the throttle itself: a wait the cap asks for, not synchronisation
        self._tokens = 0.0
        self._last = self._clock()
        self.waited += delay
        return delay
