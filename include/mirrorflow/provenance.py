"""Provenance: where a mirrored message first came from.

The first copy of a message stamps its origin (cluster, topic, partition,
offset) in the ``mirror.origin`` header; later hops keep it unchanged. That one
fact answers whether a message is already on a cluster (dedupe after a target
switch), where a consumer group stands elsewhere (exact failover), and what
came from where (audit).

A stamp proves a copy only on a record of the topic and partition it names
(copies keep both). Applications that
derive records from mirrored ones (Kafka Streams, most consume-transform-produce
code) forward their input's headers, stamp included, into *another* topic: such
a record is fresh data of the cluster it is on, not a copy (docs/copy-flags.md,
"Forwarded headers"). :func:`find` applies the rule, and every reader of origins (the
copier's flags decision, the audit's identities, exact failover, lost-checkpoint
recovery, the archive) asks it, so they all agree on what is a copy.

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


def find(headers: Sequence[tuple[str, bytes | None]] | None, topic: str, partition: int) -> Origin | None:
    """The origin stamped on a record of ``topic[partition]``, when it proves the record a copy (see the module doc).

    ``None``: no stamp, an invalid one, or one that names another topic or
    partition (headers an application forwarded from the record it derived this
    one from).
    """
    for key, value in headers or ():
        if key == HEADER or key == _HEADER_BYTES:
            origin = decode(value)
            return origin if origin is not None and origin.topic == topic and origin.partition == partition else None
    return None


def origin_of(headers: Sequence[tuple[str, bytes | None]] | None, cluster: str, topic: str, partition: int,
              offset: int) -> Origin:
    """A record's identity: the origin that proves it a copy, or its own position on ``cluster``."""
    return find(headers, topic, partition) or Origin(cluster, topic, partition, offset)


def strip(headers: Sequence[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]]:
    """``headers`` without any origin header."""
    return [h for h in headers if h[0] != HEADER and h[0] != _HEADER_BYTES]


def stamp(headers: list[tuple[str, bytes | None]], origin: Origin) -> list[tuple[str, bytes | None]]:
    """``headers`` with ``origin`` appended unless they carry a valid origin of ``origin``'s topic and partition.

    An invalid origin header (not written by mirrorflow), or one naming another
    topic (forwarded), is replaced, so every copy carries exactly one valid origin.
    """
    present = [i for i, (key, _) in enumerate(headers) if key == HEADER or key == _HEADER_BYTES]
    if len(present) == 1 and (found := decode(headers[present[0]][1])) is not None and (
            found.topic, found.partition) == (origin.topic, origin.partition):
        return headers
    if present:  # rare: invalid, repeated or forwarded origin headers are dropped
        headers = strip(headers)
    else:
        headers = list(headers)
    headers.append((HEADER, origin.encode()))
    return headers
