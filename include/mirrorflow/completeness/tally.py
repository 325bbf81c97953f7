"""Tallies: how many messages of each origin a cluster holds per time window, and which ones, in two numbers.

Every message on every cluster has one identity, its origin: the cluster, topic,
partition and offset it was first written at (:mod:`mirrorflow.provenance`, stamped
on every copy; a message produced on a cluster is its own origin). Per topic,
origin cluster and window of the record's timestamp, a tally keeps the count of
the messages and the sum of a 64-bit hash of each identity, modulo 2**64. The sum
does not depend on the order the messages were read in, so two clusters that hold
the same messages have equal tallies; a missing message lowers the count, a
duplicate raises it, and a different message with the same count changes the sum.
Tallies add up (:meth:`Tally.merge`), so each audit run reads only what arrived
since the last and adds it to what was counted before.

Copies keep their origin's timestamp (the copier produces them with it), so a
message falls into the same window on every cluster. Pure: no Kafka here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from mirrorflow import provenance

#: Window length by default (seconds): ten minutes, as in the audit's contract.
DEFAULT_WINDOW_S = 600
_MOD = 1 << 64


def identity_hash(origin: provenance.Origin) -> int:
    """A 64-bit hash of a message's identity (its origin), the same on every cluster and machine."""
    return identity_hash_of(origin.encode())


def identity_hash_of(encoded: bytes) -> int:
    """:func:`identity_hash` of an origin as its header carries it (``Origin.encode()``'s bytes)."""
    return int.from_bytes(hashlib.blake2b(encoded, digest_size=8).digest(), "big")


def window_of(timestamp_ms: int, window_s: int) -> int:
    """The start (epoch milliseconds) of the window holding ``timestamp_ms``."""
    size = window_s * 1000
    return timestamp_ms - timestamp_ms % size


@dataclass(frozen=True, order=True)
class WindowKey:
    """One cell of the comparison: a topic, an origin cluster, a window (its start, epoch ms)."""

    topic: str
    origin: str
    window_ms: int

    def encode(self) -> str:
        return f"{self.topic}|{self.origin}|{self.window_ms}"

    @classmethod
    def decode(cls, text: str) -> WindowKey:
        topic, origin, window = text.rsplit("|", 2)
        return cls(topic, origin, int(window))


@dataclass
class Tally:
    """Count and hash sum of the messages in one cell."""

    count: int = 0
    sum: int = 0

    def add(self, identity: int) -> None:
        self.count += 1
        self.sum = (self.sum + identity) % _MOD

    def merge(self, other: Tally) -> Tally:
        return Tally(self.count + other.count, (self.sum + other.sum) % _MOD)

    def to_dict(self) -> dict[str, int]:
        return {"count": self.count, "sum": self.sum}

    @classmethod
    def from_dict(cls, data: Mapping[str, int]) -> Tally:
        return cls(int(data["count"]), int(data["sum"]) % _MOD)


@dataclass
class Tallies:
    """The tallies of one cluster (any number of topics), as read so far."""

    window_s: int = DEFAULT_WINDOW_S
    cells: dict[WindowKey, Tally] = field(default_factory=dict)

    def add(self, origin: provenance.Origin, timestamp_ms: int) -> WindowKey:
        key = WindowKey(origin.topic, origin.cluster, window_of(timestamp_ms, self.window_s))
        self.cells.setdefault(key, Tally()).add(identity_hash(origin))
        return key

    def merge(self, other: Tallies) -> Tallies:
        """These tallies with ``other``'s added (the same window length)."""
        if other.window_s != self.window_s:
            raise ValueError(f"tallies of {self.window_s}s and {other.window_s}s windows cannot be added")
        cells = dict(self.cells)
        for key, tally in other.cells.items():
            cells[key] = cells[key].merge(tally) if key in cells else tally
        return Tallies(self.window_s, cells)

    def __iter__(self) -> Iterator[tuple[WindowKey, Tally]]:
        return iter(sorted(self.cells.items()))

