"""A topic's shape as a cluster holds it: its partition count and the configs that travel with its data.

Kafka's topic configs are of two kinds. Some describe the *data* (how long it is
kept, how it is compacted, how big a record may be) and travel with the topic;
the others describe how one cluster stores and protects it (replication, ISR,
throttles, placement, tiered storage, flushing) and stay with each cluster.
:func:`mirrorflow.kafka.topics.describe_topics` reads a :class:`TopicShape`;
what mirrorflow does about two shapes that differ is :mod:`mirrorflow.cluster_sync`'s.
Pure, no client: the topology validates config keys against these sets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Topic configs that belong to the topic's data and travel from source to target
#: (all exist in Kafka 4.3; ``message.timestamp.difference.max.ms`` was removed in 4.0
#: and its successors ``message.timestamp.before/after.max.ms`` are here instead).
#: Everything else stays with each cluster: ``replication.factor``, ``min.insync.replicas``,
#: ``unclean.leader.election.enable``, the replication throttles, replica placement,
#: tiered storage (``remote.storage.enable``, ``local.retention.*``), flushing, index and
#: preallocation tuning, ``segment.jitter.ms``.
TRAVELLING_CONFIGS: frozenset[str] = frozenset({
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
    "segment.bytes",
    "segment.ms",
    "compression.type",
    # The level goes with the codec it tunes (Kafka 3.8+, KIP-390): a copy of a topic set to
    # zstd level 19 should not silently compress at level 3.
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "max.message.bytes",
    "message.timestamp.type",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
})

#: Keys whose change can make a follower keep less data: their values' order is known
#: (:func:`mirrorflow.cluster_sync.ownership.keeps_less`).
KEEPING_CONFIGS: frozenset[str] = frozenset({"retention.ms", "retention.bytes", "cleanup.policy"})

MAX_MESSAGE_BYTES = "max.message.bytes"
TIMESTAMP_TYPE = "message.timestamp.type"


@dataclass(frozen=True)
class TopicShape:
    """What must match between a topic and its copies.

    ``configs`` holds only travelling configs (:data:`TRAVELLING_CONFIGS`) that were set
    explicitly on the topic (source ``DYNAMIC_TOPIC_CONFIG``); broker defaults are left
    out, since each cluster keeps its own. ``timestamp_type`` is the *effective*
    ``message.timestamp.type`` whatever set it (a broker default of ``LogAppendTime``
    matters to a mirror even though it does not travel). ``cluster`` says where the
    shape was read, for error messages.
    """

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    cluster: str = ""
    timestamp_type: str | None = None
    #: The effective ``max.message.bytes``, whatever set it (``None``: not known).
    max_message_bytes: int | None = None
    #: For each key of :data:`KEEPING_CONFIGS`: the value it takes here when the
    #: topic does not set it (the broker's), in the topic config's unit; ``None``: not known.
    defaults: dict[str, str | None] = field(default_factory=dict, compare=False)
