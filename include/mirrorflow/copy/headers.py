"""The headers a copy is produced with, decided once per shape instead of once per message.

Every copied message needs the copy-flags decision (:mod:`mirrorflow.copyflags`)
and the provenance stamp (:mod:`mirrorflow.provenance`). Done in full, that is
a large share of the copier's per-message cost for small messages
(docs/benchmarks.md). Nearly every message has one of two header shapes, though:

* neither header: a message produced on this cluster;
* the application's headers followed by ``(copy flags, v), (origin, o)``: a
  copy mirrorflow made on an earlier hop (that is where
  :func:`copyflags.rewrite_headers` and :func:`provenance.stamp` put them).

For the first, the copy gets the application's headers, the level's flags and
its origin. For the second, when ``o`` names this topic and partition (the proof that it is
a copy, :mod:`mirrorflow.provenance`), the decision depends only on the flags
bytes ``v``, which take a handful of values in a tree; it is made once per value
and remembered. Flags under an origin of another topic or partition were
forwarded by an application: the record is fresh here. Any other shape (a malformed or repeated header, an invalid
origin, the two in another place) goes through the general functions, so the
rules live in one place and the fast paths are checked against them
(``tests/unit/test_copy_headers.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from mirrorflow import copyflags, provenance

#: At most this many distinct flags values are remembered (a tree has far fewer; malformed values are never kept).
_KNOWN_LIMIT = 1024

Headers = list[tuple[str, bytes | None]]


def _plainly_proven(value: bytes | None, place: bytes) -> bool:
    """True only for an origin :func:`provenance.find` accepts on this partition; a cheaper test for the usual form.

    ``place`` is ``b":<topic>:<partition>:"``. Stricter than ``find`` (digits
    only, ASCII): a value it rejects is left to the general path, which decides
    with ``find`` itself.
    """
    if value.__class__ is not bytes or not value.isascii():
        return False
    cut = value.find(place)
    return cut > 0 and value.count(b":") == 3 and value[cut + len(place):].isdigit()


class CopyHeaders:
    """Decides and rewrites the headers of one source partition's messages.

    :meth:`for_copy` returns ``(headers, None)`` to copy, ``(None, None)`` to
    skip, and ``(headers or None, reason)`` when the copy-flags header was
    malformed (the reason is logged and counted by the caller).
    """

    def __init__(self, source: str, topic: str, partition: int, *, level: int,
                 backfill_flags: int | None = None, on_malformed: copyflags.OnMalformed = "fresh") -> None:
        self._decide: Callable[..., copyflags.Decision]
        if backfill_flags is not None:
            self._decide = lambda headers: copyflags.backfill(backfill_flags, headers, on_malformed=on_malformed)
        else:
            self._decide = lambda headers: copyflags.decide(level, headers, on_malformed=on_malformed)
        self._topic, self._partition = topic, partition
        self._origin_prefix = f"{source}:{topic}:{partition}:".encode()
        self._place = f":{topic}:{partition}:".encode()
        self._origin = lambda offset: provenance.Origin(source, topic, partition, offset)
        fresh = self._decide(None)
        # What a message without headers is copied with (a fresh message is copied at every level and by backfills).
        # flags_out is set exactly when the decision is to copy (copyflags.Decision)
        self._fresh_flags = copyflags.encode(fresh.flags_out) if fresh.flags_out is not None else None
        self._known: dict[bytes, bytes | None] = {}  # flags header value -> flags value of the copy, None = skip

    def for_copy(self, headers: Headers | None, offset: int) -> tuple[Headers | None, str | None]:
        if not headers:
            headers = []
        flags_at = origin_at = -1
        for i, (key, _) in enumerate(headers):
            if key.__class__ is not str:
                return self._general(headers, offset)  # the general rules also match keys given as bytes
            if key == copyflags.HEADER:
                if flags_at >= 0:
                    return self._general(headers, offset)
                flags_at = i
            elif key == provenance.HEADER:
                if origin_at >= 0:
                    return self._general(headers, offset)
                origin_at = i
        if flags_at < 0 and origin_at < 0:  # a message produced on this cluster
            if self._fresh_flags is not None:
                return [*headers, (copyflags.HEADER, self._fresh_flags),
                        (provenance.HEADER, self._origin_prefix + str(offset).encode())], None
        elif flags_at == len(headers) - 2 and origin_at == flags_at + 1:  # a copy from an earlier hop
            flags, origin = headers[flags_at][1], headers[origin_at][1]
            if flags.__class__ is bytes and _plainly_proven(origin, self._place):
                out = self._known.get(flags, b"")
                if out == b"":
                    out = self._learn(flags)
                if out is None:
                    return None, None
                if out != b"":
                    return [*headers[:flags_at], (copyflags.HEADER, out), headers[origin_at]], None
        return self._general(headers, offset)

    def _learn(self, flags: bytes) -> bytes | None:
        """The copy's flags value for a valid single flags header ``flags``; ``b""`` if it is malformed."""
        decision = self._decide([(copyflags.HEADER, flags)])
        if decision.malformed:
            return b""
        out = copyflags.encode(decision.flags_out) if decision.flags_out is not None else None  # set iff copied
        if len(self._known) < _KNOWN_LIMIT:
            self._known[flags] = out
        return out

    def _general(self, headers: Headers | None, offset: int) -> tuple[Headers | None, str | None]:
        decision = self._decide(headers)
        if decision.flags_in and provenance.find(headers, self._topic, self._partition) is None:
            # Valid flags without an origin that proves a copy of this partition: headers an application
            # forwarded from the record it derived this one from. Fresh data here (provenance's module doc).
            headers = provenance.strip(copyflags.without(headers))
            decision = self._decide(headers)
        out = provenance.stamp(decision.headers_for_copy(headers), self._origin(offset)) if decision.copy else None
        return out, decision.reason if decision.malformed else None
