"""Kafka error codes that mean the same thing wherever mirrorflow meets them.

One home for each class of error, so that the copier, the planner and the admin
reads agree on what "unreachable", "retry the coordinator" and "fenced" are.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

#: The cluster is not answering at all (as opposed to answering with an error).
UNREACHABLE_CODES = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT})

#: Errors a group coordinator answers while it moves or loads ``__consumer_offsets``: retry.
RETRIABLE_COORDINATOR = frozenset({
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError._WAIT_COORD,
    KafkaError._TIMED_OUT,
})

#: A newer producer with the same ``transactional.id`` took over (or the id is not allowed):
#: this copy must stop and leave the partition to the newer one.
FENCED_CODES = frozenset({
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
})

#: A reader's position is no longer in the partition's log: retention or ``delete_records`` moved the
#: log start past it, or the log was truncated below it. librdkafka reports these (with
#: ``auto.offset.reset=error``) instead of jumping; the reader must decide, never skip in silence.
SOURCE_MOVED_CODES = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError._LOG_TRUNCATION})

#: A partition's leadership is moving (just created, a broker restarting, a reassignment): the broker
#: answers for another leader soon, so a per-partition read retries it within its own deadline.
LEADERSHIP_MOVING = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.OFFSET_NOT_AVAILABLE,
})

#: What a read of a partition without a leader fails with: the broker's answer, or librdkafka's own
#: when its metadata holds no leader for the partition (``_UNKNOWN_PARTITION``).
LEADERLESS = frozenset({
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError._UNKNOWN_PARTITION,
})
