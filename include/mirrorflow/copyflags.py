"""Copy flags: the header that makes tree distribution loop-free and exactly-once.

Contract (docs/architecture.md, "Contracts"): the header is ``mirror.copy.flags``; level L owns
bit L-1. The level-L distributor on a cluster computes
``flags & ((1 << L) - 1)``: non-zero means the message was already distributed
at this level or below, so it is skipped (the distributor still advances past
it); zero means it is copied into the sibling subtree with
``flags | (1 << (L - 1))``. A message without the header has flags 0.

Encoding: the flags are written as canonical ASCII decimal (``b"5"`` for 0b101):
readable as-is in ``kafka-console-consumer --property print.headers=true`` and
``kcat -f '%h'``, trivially produced by any client (``Long.toString`` in Java),
and unambiguous: decoding accepts exactly the strings encoding produces (digits
only, no sign, no spaces, no leading zero, below 2**63), so there is one byte
form per value.

A header mirrorflow did not write (bad bytes, empty, null, too large, present
several times with different values) is *malformed*. Mirrorflow always
replaces every instance of the header with one valid value on each copy, so a
malformed header can only come from a producer outside mirrorflow, writing to
this cluster: the message originated here. The default policy ``"fresh"``
therefore treats it exactly like a message without the header (flags 0), copies
it with a valid header, keeps the original bytes in ``mirror.copy.flags.invalid``
for forensics and marks the decision ``malformed`` so the caller counts and logs
it. ``"fail"`` raises :class:`~mirrorflow.errors.MalformedCopyFlags` instead.
docs/copy-flags.md explains why "fresh" can neither loop nor duplicate.

Pure stdlib: this runs per message inside Spark executors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from mirrorflow.errors import CopyFlagsError, MalformedCopyFlags

#: The copy-flags header (contract).
HEADER = "mirror.copy.flags"
#: Where the original bytes of a malformed copy-flags header are kept on the copy.
INVALID_HEADER = "mirror.copy.flags.invalid"

LEVEL_MIN = 1
#: Bit 62 is the highest a signed 64-bit long (Java interop) can hold.
LEVEL_MAX = 63
#: The largest valid flags value, 2**63 - 1.
MAX_FLAGS = (1 << LEVEL_MAX) - 1
_MAX_DIGITS = len(str(MAX_FLAGS))  # 19

OnMalformed = Literal["fresh", "fail"]
HeaderValue = bytes | bytearray | memoryview | None
#: confluent-kafka style headers: a list of ``(key, value)`` pairs, or ``None``.
Headers = Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue] | None

_HEADER_BYTES = HEADER.encode()


# --------------------------------------------------------------------------- bits


def _check_level(level: int) -> int:
    if isinstance(level, bool) or not isinstance(level, int) or not LEVEL_MIN <= level <= LEVEL_MAX:
        raise CopyFlagsError(f"level must be an integer {LEVEL_MIN}..{LEVEL_MAX}, got {level!r}")
    return level


def bit(level: int) -> int:
    """The bit level ``level`` owns: ``1 << (level - 1)``."""
    return 1 << (_check_level(level) - 1)


def mask(level: int) -> int:
    """The bits a level-``level`` distributor inspects: its own and every lower one."""
    return (1 << _check_level(level)) - 1


def levels_of(flags: int) -> list[int]:
    """The levels whose bits are set in ``flags``, ascending (for logs and audits)."""
    return [i + 1 for i in range(flags.bit_length()) if flags >> i & 1]


# --------------------------------------------------------------------------- encoding


def encode(flags: int) -> bytes:
    """Canonical ASCII decimal, e.g. ``encode(5) == b"5"``."""
    if isinstance(flags, bool) or not isinstance(flags, int) or not 0 <= flags <= MAX_FLAGS:
        raise CopyFlagsError(f"copy flags must be an integer 0..2**63-1, got {flags!r}")
    return str(flags).encode("ascii")


def decode(value: HeaderValue) -> int:
    """The flags in one header value; :class:`MalformedCopyFlags` unless it is exactly what :func:`encode` writes."""
    if value is None:
        raise MalformedCopyFlags(None, "the header has a null value")
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise MalformedCopyFlags(value, f"expected bytes, got {type(value).__name__}")
    raw = bytes(value)
    if not raw:
        raise MalformedCopyFlags(raw, "empty value")
    if len(raw) > _MAX_DIGITS + 1:
        raise MalformedCopyFlags(raw, f"longer than {_MAX_DIGITS} digits")
    if not raw.isdigit():  # bytes.isdigit is ASCII-only
        if raw[:1] in (b"-", b"+") and raw[1:].isdigit():
            raise MalformedCopyFlags(raw, "signed value; flags are unsigned decimal digits")
        if raw.strip() != raw or b" " in raw:
            raise MalformedCopyFlags(raw, "contains whitespace")
        raise MalformedCopyFlags(raw, "not ASCII decimal digits")
    if len(raw) > 1 and raw[0] == 0x30:
        raise MalformedCopyFlags(raw, "leading zero; flags are written in canonical decimal")
    flags = int(raw)
    if flags > MAX_FLAGS:
        raise MalformedCopyFlags(raw, "value does not fit a signed 64-bit long (must be below 2**63)")
    return flags


# --------------------------------------------------------------------------- decisions


@dataclass(frozen=True, slots=True)
class Decision:
    """What a level-L distributor does with one message, and why.

    ``flags_in`` is the value the decision was made on (0 for a missing or
    malformed header); ``flags_out`` is the value the copy carries (``None`` when
    skipped). ``invalid`` holds the raw values of a malformed header, which
    :meth:`headers_for_copy` keeps on the copy under ``mirror.copy.flags.invalid``.
    """

    copy: bool
    flags_in: int
    flags_out: int | None
    malformed: bool = False
    reason: str = ""
    invalid: tuple[bytes | None, ...] = ()

    def headers_for_copy(self, headers: Headers) -> list[tuple[str, bytes | None]]:
        """The headers to produce the copy with (see :func:`rewrite_headers`)."""
        if not self.copy or self.flags_out is None:
            raise CopyFlagsError("this message is skipped, not copied: there are no headers to write")
        return rewrite_headers(headers, self.flags_out, invalid=self.invalid)


def _is_flags_key(key: object) -> bool:
    return key == HEADER or key == _HEADER_BYTES


def _pairs(headers: Headers) -> Iterable[tuple[object, HeaderValue]]:
    if headers is None:
        return ()
    if isinstance(headers, Mapping):
        return headers.items()
    return headers


def read_flags(headers: Headers, *,
               on_malformed: OnMalformed = "fresh") -> tuple[int, bool, tuple[bytes | None, ...], str]:
    """``(flags, malformed, raw values if malformed, problem)`` from a message's headers.

    A missing header gives 0. With ``on_malformed="fresh"`` a malformed header
    gives 0 and ``malformed=True``; with ``"fail"`` it raises
    :class:`MalformedCopyFlags`.
    """
    if on_malformed not in ("fresh", "fail"):
        raise CopyFlagsError(f"on_malformed must be 'fresh' or 'fail', got {on_malformed!r}")
    values = [value for key, value in _pairs(headers) if _is_flags_key(key)]
    if not values:
        return 0, False, (), ""
    raws = tuple(bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in values)
    try:
        decoded = {decode(v) for v in values}
        if len(decoded) > 1:
            raise MalformedCopyFlags(raws, f"the header is present {len(values)} times with different values")
    except MalformedCopyFlags as exc:
        if on_malformed == "fail":
            if len(values) > 1 and exc.raw != raws:
                raise MalformedCopyFlags(raws, exc.reason) from None
            raise
        return 0, True, raws, f"{exc.raw!r}: {exc.reason}"
    return decoded.pop(), False, (), ""


def decide(level: int, headers: Headers, *, on_malformed: OnMalformed = "fresh") -> Decision:
    """Whether the level-``level`` distributor copies a message with these headers.

    ``headers`` is confluent-kafka's ``Message.headers()`` (a list of
    ``(key, value)`` pairs, or ``None``). Deterministic in the header bytes, so
    every distributor on a cluster reaches consistent decisions about the same
    message.
    """
    lmask = mask(level)
    flags, malformed, raws, problem = read_flags(headers, on_malformed=on_malformed)
    seen = flags & lmask
    if seen:
        done = ", ".join(str(lv) for lv in levels_of(seen))
        return Decision(False, flags, None, False,
                        f"skip: flags {flags:#b} already carry level(s) {done} <= {level}")
    out = flags | (1 << (level - 1))
    if malformed:
        reason = f"copy: malformed copy flags header {problem}; treated as a fresh message"
    elif flags == 0:
        reason = "copy: fresh message (flags 0)"
    else:
        reason = f"copy: flags {flags:#b} carry no level <= {level}"
    return Decision(True, flags, out, malformed, reason, raws)


def backfill(bits: int, headers: Headers, *, on_malformed: OnMalformed = "fresh") -> Decision:
    """An onboarding backfill copies every message, adding ``bits`` to its flags.

    A backfill brings a new cluster the history its peers already share, so no
    level's mask applies; the added bits (every level the new cluster
    distributes at) make each of its distributors skip the copy.
    """
    flags, malformed, raws, problem = read_flags(headers, on_malformed=on_malformed)
    reason = f"backfill: malformed copy flags header {problem}; treated as flags 0" if malformed else "backfill"
    return Decision(True, flags, flags | bits, malformed, reason, raws)


# --------------------------------------------------------------------------- headers


def without(headers: Headers) -> list[tuple[str, bytes | None]]:
    """``headers`` without any copy-flags header (kept: every other header, in order)."""
    return [(k, v) for k, v in _pairs(headers) if not _is_flags_key(k)]  # type: ignore[misc]


def rewrite_headers(headers: Headers, flags_out: int, *,
                    invalid: Iterable[bytes | None] = ()) -> list[tuple[str, bytes | None]]:
    """``headers`` with every copy-flags header replaced by exactly one, carrying ``flags_out``.

    The new header takes the place of the first old one (or goes last if there
    was none); every other header keeps its position, duplicates included.
    Each value in ``invalid`` is appended as a ``mirror.copy.flags.invalid``
    header (the forensic copy of a malformed header).
    """
    value = encode(flags_out)
    out: list[tuple[str, bytes | None]] = []
    placed = False
    for key, old in _pairs(headers):
        if _is_flags_key(key):
            if not placed:
                out.append((HEADER, value))
                placed = True
            continue
        out.append((key, old))  # type: ignore[arg-type]
    if not placed:
        out.append((HEADER, value))
    out.extend((INVALID_HEADER, raw) for raw in invalid)
    return out
