"""Cutting a link's checkpoints: fence its copies, read the positions, mark them, prove nothing slipped in.

Two operator actions take a link's checkpoints away from the copier that owns
them: a target switch (the old target's checkpoints become the new target's cut)
and a renumbering (the old link id's checkpoints become the new id's). Both must
leave no copy of the old owner running that could move a position after it was
read. The cut, on one cluster:

1. fence: ``init_transactions`` with the link's ``transactional.id`` of every
   transaction group; a copy still running is aborted and can no longer commit;
2. read the checkpoints (now stable) and commit them again with a mark in their
   metadata (:func:`~mirrorflow.copy.state.switch_mark`,
   :func:`~mirrorflow.copy.state.carry_mark`): a copier that starts later reads
   the mark after its own fencing and stops, by name;
3. fence and read again: if a copy slipped in between 1 and 2 (it fenced after
   step 1 and read before step 2), the positions differ, and the cut repeats.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

from mirrorflow.copy.engine import fence
from mirrorflow.copy.state import checkpoint_group, read_checkpoints
from mirrorflow.errors import KafkaOperationError, MirrorflowError
from mirrorflow.kafka import ClusterClient

log = logging.getLogger(__name__)
_pause = threading.Event()  # never set: .wait(t) is a back-off


class CutUnstable(MirrorflowError):
    """Copies kept committing through every attempt to cut; nothing was decided."""


def commit_checkpoints(client: ClusterClient, link_id: str, offsets: list[TopicPartition], timeout: float) -> None:
    """Commit checkpoint offsets (with metadata) for the link's group, which never has members; topics are
    logical names, committed on the cluster's (a checkpoint lives on the target's topic)."""
    if not offsets:
        return
    offsets = client.on_cluster(offsets)
    consumer = Consumer(client.consumer(client.own(checkpoint_group(link_id))))
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                for tp in consumer.commit(offsets=offsets, asynchronous=False) or []:
                    if tp.error is not None:
                        raise KafkaException(tp.error)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() or time.monotonic() > deadline:
                    raise KafkaOperationError(client.name, f"commit checkpoints of link {link_id}", err) from exc
                _pause.wait(0.2)
    finally:
        consumer.close()


def cut(client: ClusterClient, link_id: str, tps: list[TopicPartition], mark: str, timeout: float,
        max_attempts: int) -> tuple[dict[tuple[str, int], int | None], int]:
    """The link's checkpoints on ``client``, fenced and marked with ``mark`` (see the module); and the attempts.

    ``None`` where the link has no checkpoint (it is marked at 0). Raises
    :class:`CutUnstable` when copies kept committing for ``max_attempts`` attempts.
    """
    for attempt in range(1, max_attempts + 1):
        fence(client, link_id, tps, timeout)
        first = read_checkpoints(client, link_id, tps, timeout) if tps else {}
        commit_checkpoints(client, link_id, [TopicPartition(t, p, off if off is not None else 0, metadata=mark)
                                             for (t, p), (off, _) in first.items()], timeout)
        fence(client, link_id, tps, timeout)
        second = read_checkpoints(client, link_id, tps, timeout) if tps else {}
        if all(second[k] == (first[k][0] if first[k][0] is not None else 0, mark) for k in first):
            return {k: v[0] for k, v in first.items()}, attempt
        log.warning("%s: a copy on %s committed while its checkpoints were cut (attempt %d); cutting again",
                    link_id, client.name, attempt)
    raise CutUnstable(f"{link_id}: copies on {client.name} kept committing during {max_attempts} attempts to cut; "
                      "pause the level DAG and retry")
