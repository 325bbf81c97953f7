"""A small client layer over confluent-kafka: what mirrorflow asks of a cluster, and errors that name it.

The room offers clients and questions, never a decision about what a cluster
should hold: what mirrorflow changes on a cluster (topic shapes, configs, ACLs,
the read-only guard) is :mod:`mirrorflow.cluster_sync`, a layer above. By module:

- :mod:`~mirrorflow.kafka.config`: ``ClusterClient``, a cluster's settings rendered
  as admin, consumer and producer configs, its secrets hidden;
- :mod:`~mirrorflow.kafka.admin`: the admin queries planners and checks need (probe,
  topics, offsets, topic ids, groups);
- :mod:`~mirrorflow.kafka.shared`: one admin client per cluster for a while (a plan);
- :mod:`~mirrorflow.kafka.kept`: the clients a long-lived poller keeps between its polls;
- :mod:`~mirrorflow.kafka.shapes`: a topic's shape, and which topic configs travel
  with its data (pure);
- :mod:`~mirrorflow.kafka.topics`: topics described (shapes, broker defaults),
  created, grown and their configs altered in requests a controller accepts, and
  the metadata wait after a topic is created or grown;
- :mod:`~mirrorflow.kafka.ranges`: bounded reads, from an offset to an end;
- :mod:`~mirrorflow.kafka.records`: a consumed record's parts, read safely;
- :mod:`~mirrorflow.kafka.compacted`: one-partition compacted topics as key-value stores;
- :mod:`~mirrorflow.kafka.compression`: how copies are compressed, and the producer sizes with it;
- :mod:`~mirrorflow.kafka.codes`: error codes grouped by what they mean;
- :mod:`~mirrorflow.kafka.refusals`, :mod:`~mirrorflow.kafka.handshake`,
  :mod:`~mirrorflow.kafka.principal`: a refused permission or login, said as an
  operator reads it, and who a client logs in as;
- :mod:`~mirrorflow.kafka.deadline`: a deadline of our own around a call that may
  not keep its timeout.

The rule: this room imports only the base layer (errors, secrets, internal names),
never a room above it, and decides nothing about what a cluster should hold.
Outside ``kafka/`` import from here: these names are the room's face
(tests/unit/test_layers.py holds it). Importing the face imports no
confluent-kafka: the names of the modules that do are loaded on first use, so the
topology's validation (which needs only the shapes) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirrorflow.faces import on_first_use
from mirrorflow.kafka.compression import (
    CODEC_KEYS,
    CODECS,
    COPY_CODEC,
    LIBRDKAFKA_MAX_MESSAGE_BYTES,
    codec_settings,
    copy_codec,
    size_settings,
)
from mirrorflow.kafka.config import CONSUME_WAIT_S, ClusterClient
from mirrorflow.kafka.principal import principal_of
from mirrorflow.kafka.records import read_headers
from mirrorflow.kafka.shapes import KEEPING_CONFIGS, MAX_MESSAGE_BYTES, TIMESTAMP_TYPE, TRAVELLING_CONFIGS, TopicShape

if TYPE_CHECKING:
    from mirrorflow.kafka.admin import (
        ClusterInfo,
        committed_offsets,
        earliest_and_stable,
        earliest_and_stable_or_errors,
        earliest_and_stable_or_leaderless,
        group_ids,
        list_topics,
        logical_earliest_and_stable,
        mirrored_topics,
        offsets_or_errors,
        offsets_retention_s,
        probe,
        settled_watermarks,
        topic_ids,
        watermarks,
    )
    from mirrorflow.kafka.codes import (
        FENCED_CODES,
        LEADERLESS,
        LEADERSHIP_MOVING,
        RETRIABLE_COORDINATOR,
        SOURCE_MOVED_CODES,
        UNREACHABLE_CODES,
    )
    from mirrorflow.kafka.compacted import WRITE_CHUNK, ensure_compacted, read_whole, write_all
    from mirrorflow.kafka.deadline import CallAbandoned, within
    from mirrorflow.kafka.kept import KeptClients, active
    from mirrorflow.kafka.ranges import READER_FETCH_WAIT_MS, RangeReader
    from mirrorflow.kafka.refusals import CLUSTER_RESOURCE, Need, NotAuthorized, call_failed, is_refusal, refusal
    from mirrorflow.kafka.shared import admin_for, discard, shared_count, sharing_admins
    from mirrorflow.kafka.topics import (
        PARTITIONS_PER_REQUEST,
        alter_topic_configs,
        await_partitions,
        batches,
        broker_defaults,
        create_partitions,
        create_topics,
        describe_logical,
        describe_topics,
        error_code,
        inherited,
        topic_failure,
    )

#: The names of the modules that import confluent-kafka, and the module of this package each comes from.
_LAZY = {
    "ClusterInfo": "admin", "committed_offsets": "admin", "earliest_and_stable": "admin",
    "earliest_and_stable_or_errors": "admin", "earliest_and_stable_or_leaderless": "admin", "group_ids": "admin",
    "logical_earliest_and_stable": "admin",
    "list_topics": "admin", "mirrored_topics": "admin", "offsets_or_errors": "admin",
    "offsets_retention_s": "admin", "probe": "admin",
    "settled_watermarks": "admin",
    "topic_ids": "admin",
    "watermarks": "admin", "FENCED_CODES": "codes", "LEADERLESS": "codes", "LEADERSHIP_MOVING": "codes",
    "RETRIABLE_COORDINATOR": "codes", "SOURCE_MOVED_CODES": "codes", "UNREACHABLE_CODES": "codes",
    "WRITE_CHUNK": "compacted", "ensure_compacted": "compacted", "read_whole": "compacted", "write_all": "compacted",
    "CallAbandoned": "deadline", "within": "deadline", "KeptClients": "kept", "active": "kept",
    "READER_FETCH_WAIT_MS": "ranges", "RangeReader": "ranges", "CLUSTER_RESOURCE": "refusals", "Need": "refusals",
    "NotAuthorized": "refusals",
    "call_failed": "refusals", "is_refusal": "refusals", "refusal": "refusals", "admin_for": "shared",
    "discard": "shared", "shared_count": "shared", "sharing_admins": "shared", "PARTITIONS_PER_REQUEST": "topics",
    "alter_topic_configs": "topics", "await_partitions": "topics", "batches": "topics", "broker_defaults": "topics",
    "create_partitions": "topics", "create_topics": "topics", "describe_logical": "topics",
    "describe_topics": "topics", "error_code": "topics",
    "inherited": "topics", "topic_failure": "topics",
}


__getattr__ = on_first_use(__name__, _LAZY)


__all__ = [
    "CLUSTER_RESOURCE",
    "CODECS",
    "CODEC_KEYS",
    "CONSUME_WAIT_S",
    "COPY_CODEC",
    "CallAbandoned",
    "ClusterClient",
    "ClusterInfo",
    "FENCED_CODES",
    "KEEPING_CONFIGS",
    "KeptClients",
    "LEADERLESS",
    "LEADERSHIP_MOVING",
    "LIBRDKAFKA_MAX_MESSAGE_BYTES",
    "MAX_MESSAGE_BYTES",
    "Need",
    "NotAuthorized",
    "PARTITIONS_PER_REQUEST",
    "READER_FETCH_WAIT_MS",
    "RETRIABLE_COORDINATOR",
    "RangeReader",
    "SOURCE_MOVED_CODES",
    "TIMESTAMP_TYPE",
    "TRAVELLING_CONFIGS",
    "TopicShape",
    "UNREACHABLE_CODES",
    "WRITE_CHUNK",
    "active",
    "admin_for",
    "alter_topic_configs",
    "await_partitions",
    "batches",
    "broker_defaults",
    "call_failed",
    "codec_settings",
    "committed_offsets",
    "copy_codec",
    "create_partitions",
    "create_topics",
    "describe_logical",
    "describe_topics",
    "discard",
    "earliest_and_stable",
    "earliest_and_stable_or_errors",
    "earliest_and_stable_or_leaderless",
    "ensure_compacted",
    "error_code",
    "group_ids",
    "inherited",
    "is_refusal",
    "list_topics",
    "logical_earliest_and_stable",
    "mirrored_topics",
    "offsets_or_errors",
    "offsets_retention_s",
    "principal_of",
    "probe",
    "read_headers",
    "read_whole",
    "refusal",
    "shared_count",
    "settled_watermarks",
    "sharing_admins",
    "size_settings",
    "topic_failure",
    "topic_ids",
    "watermarks",
    "within",
    "write_all",
]
