"""Provenance: where a mirrored message first came from.

The first copy of a message stamps its origin (cluster, topic, partition,
offset) in the ``mirror.origin`` header; later hops keep it unchanged. That one
fact answers whether a message is already on a cluster (dedupe after a target
switch), where a consumer group stands elsewhere (exact failover), and what
came from where (audit).

Value: ASCII ``<cluster>:<topic>:<partition>:<offset>``. Cluster names and topic
names cannot contain ``:`` (Kafka allows ``[A-Za-z0-9._-]`` in topic names and the
topology the same for clusters), so the split is unambiguous.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

HEADER = "mirror.origin"
_HEADER_BYTES = HEADER.encode()


@dataclass(frozen=True, slots=True)
class Origin:
    cluster: str
    topic: str
    partition: int
    offset: int

    def encode(self) -> bytes:
        return f"{self.cluster}:{self.topic}:{self.partition}:{self.offset}".encode()


def decode(value: bytes | None) -> Origin | None:
    """The origin in a header value, or ``None`` if the value is not one mirrorflow wrote."""
    if not value:
        return None
    try:
        cluster, topic, partition, offset = bytes(value).decode("ascii").split(":")
        origin = Origin(cluster, topic, int(partition), int(offset))
    except (UnicodeDecodeError, ValueError):
        return None
    return origin if cluster and topic and origin.partition >= 0 and origin.offset >= 0 else None


def find(headers: Sequence[tuple[str, bytes | None]] | None) -> Origin | None:
    for key, value in headers or ():
        if key == HEADER or key == _HEADER_BYTES:
            return decode(value)
    return None


def origin_of(headers: Sequence[tuple[str, bytes | None]] | None, cluster: str, topic: str, partition: int,
              offset: int) -> Origin:
    """A record's identity: the origin stamped on it, or its own position on ``cluster`` when it has none."""
    return find(headers) or Origin(cluster, topic, partition, offset)


def stamp(headers: list[tuple[str, bytes | None]], origin: Origin) -> list[tuple[str, bytes | None]]:
    """``headers`` with ``origin`` appended unless the message already carries a valid origin.

    An invalid origin header (not written by mirrorflow) is replaced, so every
    copy carries exactly one valid origin.
    """
    present = [i for i, (key, _) in enumerate(headers) if key == HEADER or key == _HEADER_BYTES]
    if len(present) == 1 and decode(headers[present[0]][1]) is not None:
        return headers
    if present:  # rare: invalid or repeated origin headers are dropped
        headers = [h for h in headers if h[0] != HEADER and h[0] != _HEADER_BYTES]
    else:
        headers = list(headers)
    headers.append((HEADER, origin.encode()))
    return headers
