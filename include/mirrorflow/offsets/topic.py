"""The internal topic ``_mirrorflow.offsets``: create it, publish positions, read the latest ones."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mirrorflow.errors import KafkaOperationError
from mirrorflow.formats import NewerFormat
from mirrorflow.internal_names import OFFSETS_READER_GROUP
from mirrorflow.kafka import ClusterClient, NotAuthorized, ensure_compacted, read_whole, write_all
from mirrorflow.offsets.position import OFFSETS_TOPIC, Position

log = logging.getLogger(__name__)

#: Compacted: each cluster keeps the latest record of every (owner, group, topic, partition).
TOPIC_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"}


def ensure_topic(client: ClusterClient, timeout: float = 30.0) -> bool:
    """Create the offsets topic if it is missing; ``True`` if it was created."""
    return ensure_compacted(client, client.own(OFFSETS_TOPIC), TOPIC_CONFIG, timeout)


def publish(client: ClusterClient, positions: Iterable[Position], timeout: float = 30.0) -> int:
    """Write positions to the cluster's offsets topic; every delivery is checked."""
    try:
        return write_all(client, client.own(OFFSETS_TOPIC), ((pos.key(), pos.to_json()) for pos in positions),
                         timeout=timeout)
    except NotAuthorized:
        raise  # names the ACL already
    except KafkaOperationError as exc:
        raise KafkaOperationError(client.name, f"publish positions to {client.own(OFFSETS_TOPIC)}", exc.error) from exc


def read_positions(client: ClusterClient, timeout: float = 30.0) -> dict[bytes, Position]:
    """The newest position (highest ``seq``) of every key on this cluster (read_committed, up to its end).

    Records mirrorflow cannot parse are skipped with a warning naming their
    offset, never guessed at; a record of a newer format stops the read (:class:`~mirrorflow.formats.NewerFormat`).
    """
    latest: dict[bytes, Position] = {}
    for msg in read_whole(client, client.own(OFFSETS_TOPIC), OFFSETS_READER_GROUP, timeout):
        if msg.value() is None:
            continue  # a tombstone
        try:
            pos = Position.from_json(msg.value(), f"topic {client.own(OFFSETS_TOPIC)} on {client.name}, "
                                                  f"offset {msg.offset()}")
        except NewerFormat:
            raise  # written by a newer mirrorflow: stop, never skip what it published
        except Exception as exc:
            log.warning("%s %s@%d: %s; skipped", client.name, client.own(OFFSETS_TOPIC), msg.offset(), exc)
            continue
        old = latest.get(pos.key())
        if old is None or pos.seq >= old.seq:
            latest[pos.key()] = pos
    return latest
