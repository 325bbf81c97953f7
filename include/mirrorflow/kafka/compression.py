"""How copies are compressed on their way to a target, and the producer's size settings that go with it.

A topic left at Kafka's ``compression.type=producer`` stores each batch as its
producer compressed it. Copies written uncompressed (librdkafka's default) took
3 to 50 times the source's bytes on the other clusters, so ``retention.bytes``
kept a fraction of the history there. The copier therefore compresses with the
target cluster's own ``compression.type`` from its topology ``config``, and
without one with :data:`COPY_CODEC` (chosen by measurement: docs/benchmarks.md,
"Compression of copies"; why not the source's codec: docs/topics.md).

Compression changes which size a producer may check. librdkafka refuses a message
whose *uncompressed* size exceeds ``message.max.bytes`` before compressing it;
the broker checks the topic's ``max.message.bytes`` against the *compressed*
record batch. :func:`size_settings` leaves the record's own size to the broker
when copies are compressed, and keeps batches within the limit before compression,
which bounds them after it too (librdkafka sends a batch uncompressed when
compressing would make it larger).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: librdkafka's codecs (``compression.type``, and its alias ``compression.codec``).
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: The keys a cluster's ``config`` may set the codec with.
CODEC_KEYS = ("compression.type", "compression.codec")
#: The codec of copies when the target cluster's ``config`` names none.
COPY_CODEC = "zstd"
#: librdkafka's upper bound for ``message.max.bytes``: a compressed copy's size is left to the broker.
LIBRDKAFKA_MAX_MESSAGE_BYTES = 1_000_000_000


def copy_codec(settings: Mapping[str, Any]) -> str:
    """The codec a producer of copies to this cluster uses: the cluster's own setting, else :data:`COPY_CODEC`."""
    for key in CODEC_KEYS:
        if key in settings:
            return str(settings[key])
    return COPY_CODEC


def codec_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The producer settings that make copies compressed: none when the cluster's ``config`` names a codec."""
    return {} if any(key in settings for key in CODEC_KEYS) else {"compression.type": COPY_CODEC}


def size_settings(codec: str, max_message_bytes: int | None) -> dict[str, Any]:
    """``message.max.bytes`` and ``batch.size`` of a producer of copies to a topic limited to ``max_message_bytes``
    (``None``: not known; librdkafka's default ``batch.size`` then keeps batches within Kafka's default limit).

    - ``batch.size`` is the topic's limit: several copies go in one batch only while their
      uncompressed bytes fit it, so a batch of several is never refused for its size.
    - Uncompressed (``none``), ``message.max.bytes`` is the limit too: a copy over it is refused
      locally, at its exact offset, before anything is sent.
    - Compressed, ``message.max.bytes`` is librdkafka's maximum: a copy over the limit
      uncompressed goes out alone in its batch, and the broker, which checks the compressed
      batch, decides. One it refuses stops its partition at its exact offset as well
      (``mirrorflow.copy.engine.partition``: a refused batch is copied again one message at a time).
    """
    limit = min(max(1000, max_message_bytes), LIBRDKAFKA_MAX_MESSAGE_BYTES) if max_message_bytes else None
    if codec == "none":
        return {} if limit is None else {"message.max.bytes": limit, "batch.size": limit}
    return {"message.max.bytes": LIBRDKAFKA_MAX_MESSAGE_BYTES, **({} if limit is None else {"batch.size": limit})}
