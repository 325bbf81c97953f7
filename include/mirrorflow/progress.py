"""Progress a person can follow: one log line every so often while a long task runs, and one at its end.

An onboarding backfill, an archive run, a completeness audit or a big level
micro-batch can run for many minutes; until now their logs said little until
they ended, so nobody could tell a slow run from a stuck one, or say when it
would be done. A :class:`Progress` is told what its task planned (records, and
bytes when known) and what got done; at most every ``interval`` seconds it logs
one readable line to ``mirrorflow.progress`` and one ``progress`` journal line
(:mod:`mirrorflow.journal`), e.g.::

    progress level 1 run manual__x: 12,345 of 50,000 records (24.7%), 3.2 MB, 1,234 records/s, about 31 s left

Records are the source offsets a task has passed (transaction markers
included), the unit its plan is made in. The interval is ``MIRRORFLOW_PROGRESS_S``
(default 30 s; ``0``: at every update). Counting must never slow a copy: callers
count per consumed batch or committed transaction, never per message, and a
copier reports through :func:`note`, which costs one context-variable read when
nobody listens (on a Spark executor, always). Work running on Spark is measured
in finished Spark tasks instead (:mod:`mirrorflow.spark.run`): the driver learns
records and bytes only when the job ends.

Pure: no Airflow, no Spark, no Kafka; the clock is injectable for tests.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mirrorflow.journal import journal_entry

log = logging.getLogger(__name__)

#: Seconds between two progress lines of one task (environment variable; ``0``: every update).
PROGRESS_ENV = "MIRRORFLOW_PROGRESS_S"
DEFAULT_INTERVAL_S = 30.0
#: The background ticker wakes at least this far apart, whatever the interval (``0`` included).
MIN_TICK_S = 0.2


def interval_s(environ: Mapping[str, str] | None = None) -> float:
    """The interval ``MIRRORFLOW_PROGRESS_S`` asks for; the default when unset or (with a warning) not seconds >= 0."""
    text = (environ if environ is not None else os.environ).get(PROGRESS_ENV, "").strip()
    if not text:
        return DEFAULT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        log.warning("%s=%r is not a number of seconds >= 0; progress lines every %.0f s", PROGRESS_ENV, text,
                    DEFAULT_INTERVAL_S)
        return DEFAULT_INTERVAL_S
    return value


@dataclass(frozen=True)
class Snapshot:
    """One moment of a task's progress, and what a line says about it."""

    what: str
    records: int
    planned: int | None
    bytes: int
    planned_bytes: int | None
    elapsed_s: float
    #: ``records``: counted as the work goes; ``spark_tasks``: finished Spark tasks (records at the end only).
    measured: str
    tasks_done: int | None
    tasks: int | None
    final: bool
    outcome: str | None = None

    @property
    def fraction(self) -> float | None:
        """Share of the plan done (0..1), from what is measured; ``None`` when there is no plan to compare with."""
        if self.measured == "spark_tasks" and not self.final:
            return self.tasks_done / self.tasks if self.tasks and self.tasks_done is not None else None
        if self.planned is None or self.planned <= 0:
            return None
        return min(1.0, self.records / self.planned)

    @property
    def rate(self) -> float | None:
        """Records per second since the start; ``None`` while records are not counted (on Spark)."""
        if self.measured == "spark_tasks" and not self.final:
            return None
        return self.records / self.elapsed_s if self.elapsed_s > 0 else None

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the pace so far; ``None`` without a plan or before anything was done."""
        fraction = self.fraction
        if self.final or fraction is None or fraction <= 0:
            return None
        return self.elapsed_s * (1 - fraction) / fraction

    def line(self) -> str:
        """The readable line (see the module)."""
        parts = []
        if self.measured == "spark_tasks" and not self.final:
            if self.tasks:
                parts.append(f"{self.tasks_done or 0:,} of {self.tasks:,} Spark tasks done "
                             f"({100 * (self.fraction or 0.0):.1f}%)")
            else:
                parts.append("running on Spark, no task count reported yet")
            parts.append(f"{self.planned:,} records planned" if self.planned is not None
                         else "records planned unknown")
            eta = self.eta_s
            if eta is not None:
                parts.append(f"about {_duration(eta)} left")
            return (f"progress {self.what}: " + ", ".join(parts)
                    + "; records and bytes are known when the Spark job ends")
        head = f"progress {self.what}: "
        if self.final:
            head += f"{self.outcome or 'done'}, "
        fraction = self.fraction
        if self.planned is not None and self.planned > 0:
            parts.append(f"{self.records:,} of {self.planned:,} records ({100 * (fraction or 0.0):.1f}%)")
        elif self.planned == 0:
            parts.append(f"{self.records:,} records (none planned)")
        else:
            parts.append(f"{self.records:,} records")
        if self.planned_bytes:
            parts.append(f"{_size(self.bytes)} of about {_size(self.planned_bytes)}")
        else:
            parts.append(_size(self.bytes))
        rate = self.rate
        if self.final:
            parts[-1] += f" in {_duration(self.elapsed_s)}"
        if rate is not None:
            parts.append(f"{rate:,.0f} records/s")
        if self.final and self.tasks:
            parts.append(f"{self.tasks_done or 0:,} of {self.tasks:,} Spark tasks")
        eta = self.eta_s
        if eta is not None:
            parts.append(f"about {_duration(eta)} left")
        line = head + ", ".join(parts)
        if self.planned is None and not self.final:
            line += "; the plan is unknown, so no percent or time left"
        return line

    def fields(self) -> dict[str, Any]:
        """The journal line's fields (besides the caller's own, such as ``run_id``)."""
        fraction, rate, eta = self.fraction, self.rate, self.eta_s
        return {
            "what": self.what, "records": self.records, "planned": self.planned, "bytes": self.bytes,
            "planned_bytes": self.planned_bytes, "measured": self.measured,
            "percent": None if fraction is None else round(100 * fraction, 1),
            "records_per_s": None if rate is None else round(rate, 1),
            "eta_s": None if eta is None else round(eta, 1),
            "elapsed_s": round(self.elapsed_s, 3), "tasks_done": self.tasks_done, "tasks": self.tasks,
            "final": self.final, "outcome": self.outcome,
        }


class Progress:
    """What one long task planned and has done so far, and its progress lines (see the module).

    Thread-safe: copy threads call :meth:`add` at once, a ticker thread or a Spark
    listener calls :meth:`tasks`, and each line is decided under one lock (so two
    threads never both emit for the same interval) but logged outside it.
    ``fields`` go into every journal line (``run_id``, ``job``, ...).
    """

    def __init__(self, what: str, planned: int | None = None, planned_bytes: int | None = None, *,
                 interval: float | None = None, clock: Callable[[], float] = time.monotonic,
                 fields: Mapping[str, Any] | None = None) -> None:
        self.what = what
        self.interval = interval_s() if interval is None else max(0.0, interval)
        self._clock = clock
        self._fields = dict(fields or {})
        self._lock = threading.Lock()
        self._planned, self._planned_bytes = planned, planned_bytes
        self._records = self._bytes = 0
        self._measured = "records"
        self._tasks_done: int | None = None
        self._tasks: int | None = None
        self._started = self._last = clock()
        self._finished = False
        #: Lines emitted so far, the final one included (tests; a task's own summary).
        self.lines = 0

    # ----------------------------------------------------------------- what the task reports

    def add(self, records: int, bytes: int = 0) -> None:
        """``records`` more done (and ``bytes``); logs a line if one is due. Call per batch, never per message."""
        with self._lock:
            self._records += records
            self._bytes += bytes
            due = self._due()
        if due is not None:
            self._emit(due)

    def set(self, records: int | None = None, bytes: int | None = None, *, planned: int | None = None,
            planned_bytes: int | None = None) -> None:
        """Replace what is known (a count read from elsewhere, a plan that grew); logs a line if one is due."""
        with self._lock:
            if records is not None:
                self._records = records
            if bytes is not None:
                self._bytes = bytes
            if planned is not None:
                self._planned = planned
            if planned_bytes is not None:
                self._planned_bytes = planned_bytes
            due = self._due()
        if due is not None:
            self._emit(due)

    def plan_more(self, records: int) -> None:
        """The plan grew (or shrank, when negative) by ``records``: a part of it is now known exactly."""
        with self._lock:
            if self._planned is not None:
                self._planned = max(0, self._planned + records)

    def on_spark(self) -> None:
        """From now on the work runs on Spark: measured in finished Spark tasks until :meth:`finish`."""
        with self._lock:
            self._measured = "spark_tasks"

    def tasks(self, done: int, total: int) -> None:
        """What Spark reported: ``done`` of ``total`` tasks finished. Logs a line if one is due."""
        with self._lock:
            self._tasks_done, self._tasks = done, total
            due = self._due()
        if due is not None:
            self._emit(due)

    def tasks_ended(self, total: int) -> None:
        """The Spark job returned the results of all its ``total`` tasks (no line: :meth:`finish` follows)."""
        with self._lock:
            self._tasks_done = self._tasks = total

    # ----------------------------------------------------------------- lines

    def snapshot(self, *, final: bool = False, outcome: str | None = None) -> Snapshot:
        with self._lock:
            return self._snapshot(final, outcome)

    def tick(self) -> Snapshot | None:
        """Log a line if one is due (the ticker calls this, so lines come even while nothing moves)."""
        with self._lock:
            due = self._due()
        if due is not None:
            self._emit(due)
        return due

    def finish(self, records: int | None = None, bytes: int | None = None, *, outcome: str | None = None
               ) -> Snapshot:
        """The final line, always (once): ``records``/``bytes`` are the task's own totals when it has them."""
        with self._lock:
            if records is not None:
                self._records = records
            if bytes is not None:
                self._bytes = bytes
            snap = self._snapshot(True, outcome)
            already, self._finished = self._finished, True
        if not already:
            self._emit(snap)
        return snap

    @contextlib.contextmanager
    def running(self, poll: Callable[[], None] | None = None) -> Iterator[Progress]:
        """A ticker thread while the block runs: ``poll()`` (refresh from elsewhere), then a line when due.

        Lines then come at the interval even while the caller is blocked (a Spark
        job's ``collect``) or nothing moves (a stuck source). The thread ends with
        the block; a failure in ``poll`` is logged and never fails the task. A block
        that raises gets its final line, naming the exception, before it propagates.
        """
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(max(self.interval, MIN_TICK_S)):
                try:
                    if poll is not None:
                        poll()
                    self.tick()
                except Exception as exc:  # noqa: BLE001 - progress is information, never a reason to fail
                    log.debug("progress of %s: %s", self.what, exc)

        thread = threading.Thread(target=loop, name="mirrorflow-progress", daemon=True)
        thread.start()
        try:
            yield self
        except BaseException as exc:
            stop.set()
            thread.join()
            self.finish(outcome=f"stopped ({type(exc).__name__})")
            raise
        finally:
            stop.set()
            thread.join()

    def _snapshot(self, final: bool, outcome: str | None) -> Snapshot:
        return Snapshot(self.what, self._records, self._planned, self._bytes, self._planned_bytes,
                        max(0.0, self._clock() - self._started), self._measured, self._tasks_done, self._tasks,
                        final, outcome)

    def _due(self) -> Snapshot | None:
        """Under the lock: the snapshot to log now, or ``None`` (not yet, or finished)."""
        if self._finished:
            return None
        now = self._clock()
        if now - self._last < self.interval:
            return None
        self._last = now
        return self._snapshot(False, None)

    def _emit(self, snap: Snapshot) -> None:
        with self._lock:
            self.lines += 1
        log.info("%s", snap.line())
        journal_entry("progress", **self._fields, **snap.fields())


# --------------------------------------------------------------------------- copiers report here


_current: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("mirrorflow_progress", default=None)


def note(records: int, bytes: int = 0) -> None:
    """A copier's batch or transaction is done: counted by the task's :class:`Progress`, if one listens here.

    Copiers call this instead of being handed a tracker, so that the code Spark
    executors run stays the same: there nobody listens and this is one
    context-variable read.
    """
    progress = _current.get()
    if progress is not None:
        progress.add(records, bytes)


@contextlib.contextmanager
def tracking(progress: Progress | None) -> Iterator[Progress | None]:
    """:func:`note` counts into ``progress`` in this context (threads started with :func:`in_context` included)."""
    token = _current.set(progress)
    try:
        yield progress
    finally:
        _current.reset(token)


def in_context(target: Callable[[], None]) -> Callable[[], None]:
    """``target`` to run on another thread with this thread's context (so its :func:`note` calls count here)."""
    context = contextvars.copy_context()
    return lambda: context.run(target)


def _size(n: int) -> str:
    """Bytes for a person: ``3.2 MB`` (decimal units, as network rates are given)."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def _duration(seconds: float) -> str:
    """``31 s``, ``4 min``, ``2.5 h``: as precise as a person waiting needs."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
