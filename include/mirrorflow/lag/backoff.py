"""How long the ``on_data`` watcher leaves a failing link or partition alone: doubling, bounded. Pure.

A partition stopped by a retention gap (``on_gap: fail``), a missing leader or a
record too large fails every run until someone acts. Without a memory of that,
the watcher asked for a run again after 60 s, or at its 2 s floor while the sick
partition's source grew. Now each level run records which of its links and
partitions failed (:class:`Failing`, written by the level's ``copy`` task), and
the watcher counts, per link or partition, the runs in a row that failed it:

- the first failed run leaves it alone for ``first_s`` seconds after the last run
  that was asked for, each further one doubles that, up to ``cap_s``;
- what waits on it alone starts no run meanwhile; records waiting elsewhere, on
  healthy links and partitions, start runs at once (each run still tries every
  partition of the level, so the sick one is retried with them);
- a run that does not fail it any more ends the back-off at once.

A key is ``(link, topic, partition)``; ``partition`` is ``None`` for a whole topic
and ``topic`` is ``"*"`` for a whole link (its plan failed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Seconds a link or partition is left alone after its first failed run; doubled per further one.
DEFAULT_FIRST_S = 10.0
#: The back-off's bound: a sick partition is still retried this often.
DEFAULT_CAP_S = 300.0

#: ``(link, topic or "*", partition or None)``
Key = tuple[str, str, int | None]


@dataclass(frozen=True)
class Failing:
    """What the level's latest finished run failed: ``run`` tells one run from the next (id and end)."""

    run: str
    keys: frozenset[Key] = frozenset()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Failing | None:
        """From the stored form (:meth:`to_dict`); ``None`` for nothing stored yet."""
        if not data or not data.get("run"):
            return None
        return cls(str(data["run"]), frozenset((str(l), str(t), None if p is None else int(p))
                                               for l, t, p in data.get("failing") or ()))

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "failing": sorted([list(k) for k in self.keys], key=repr)}


def failing_keys(errors: Iterable[Mapping[str, Any]]) -> frozenset[Key]:
    """The keys of a level run's errors (``JobResult.summary()["error_details"]``: link, topic, partition)."""
    return frozenset((str(e["link"]), str(e.get("topic") or "*"), e.get("partition")) for e in errors)


def describe(key: Key) -> str:
    link, topic, partition = key
    if topic == "*":
        return f"link {link}"
    return f"link {link} {topic}" + ("" if partition is None else f"[{partition}]")


@dataclass
class _Sick:
    strikes: int
    #: When the last run that retries it was asked for (epoch seconds): its back-off counts from there.
    asked_at: float


@dataclass
class Backoff:
    """The watcher's memory of failing links and partitions (see the module)."""

    first_s: float = DEFAULT_FIRST_S
    cap_s: float = DEFAULT_CAP_S
    _sick: dict[Key, _Sick] = field(default_factory=dict)
    _seen: str | None = None
    _last_asked: float | None = None

    def observe(self, failing: Failing | None, now: float) -> list[str]:
        """Count a run's failures once per run; the sentences for the log (what started or ended a back-off)."""
        if failing is None or failing.run == self._seen:
            return []
        self._seen = failing.run
        said = []
        for key in sorted(self._sick.keys() - failing.keys, key=repr):
            del self._sick[key]
            said.append(f"{describe(key)} copied again: runs for it start at once again")
        for key in sorted(failing.keys, key=repr):
            sick = self._sick.get(key)
            if sick is None:  # counted from the watcher's last ask, or from now (a run it did not ask for)
                sick = self._sick[key] = _Sick(0, self._last_asked if self._last_asked is not None else now)
            sick.strikes += 1
            said.append(f"{describe(key)} failed in {sick.strikes} run(s) in a row: what waits on it alone starts "
                        f"no run for {self.delay(key):g}s (doubling per failed run, at most {self.cap_s:g}s); "
                        f"other links and partitions start runs at once")
        return said

    def delay(self, key: Key) -> float:
        sick = self._sick.get(key)
        if sick is None:
            return 0.0
        return min(self.cap_s, self.first_s * 2 ** max(0, sick.strikes - 1))

    def sick_key(self, link: str, topic: str, partition: int) -> Key | None:
        """The failing key that covers this partition, if any: itself, its topic, or its whole link."""
        for key in ((link, topic, partition), (link, topic, None), (link, "*", None)):
            if key in self._sick:
                return key
        return None

    def holds(self, link: str, topic: str, partition: int, now: float) -> float:
        """Seconds left before records waiting on this partition may start a run (0: they may now)."""
        key = self.sick_key(link, topic, partition)
        if key is None:
            return 0.0
        return max(0.0, self._sick[key].asked_at + self.delay(key) - now)

    def asked(self, now: float) -> None:
        """A run was asked for: it retries every sick partition too, so each one's back-off counts from now."""
        self._last_asked = now
        for sick in self._sick.values():
            sick.asked_at = now

    @property
    def sick(self) -> dict[Key, int]:
        """Failing key -> runs in a row that failed it."""
        return {k: s.strikes for k, s in self._sick.items()}
