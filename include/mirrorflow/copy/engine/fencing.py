"""Fencing a link's copies, and reading its checkpoints past a dead attempt's open transaction.

A copy commits its checkpoint inside its transaction. An attempt killed in the
middle of one (a worker killed with ``kill -9``, a lost Spark driver) leaves that
transaction open on the target, holding pending offsets of the link's group; a
``read_committed`` client asking for the group's committed offsets then waits
until the broker aborts it (``transaction.timeout.ms``, a minute), and a planner
asking with a 30 s deadline fails. The next attempt's copier fences the dead one
anyway (``init_transactions`` with the same ``transactional.id`` aborts its
transaction), so a planner that meets the wait does that first, names it, and
reads again: the next run is exact at once instead of a minute later.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from mirrorflow.copy.state.checkpoints import read_checkpoints
from mirrorflow.copy.txn_groups import transactional_id
from mirrorflow.errors import KafkaOperationError
from mirrorflow.kafka import ClusterClient

log = logging.getLogger(__name__)

#: How long a planner waits for a link's checkpoints before it fences the link's
#: open transactions: far more than a healthy read takes (milliseconds), far less
#: than a dead attempt's transaction lives.
STALLED_READ_S = 5.0

def fence(client: ClusterClient, link_id: str, tps: list[TopicPartition], timeout: float) -> None:
    """Bump the producer epoch of every partition's ``transactional.id`` on ``client``: running copies abort.

    Partitions of one transaction group share an id (mirrorflow.copy.txn_groups): each id is fenced once.
    """
    fenced: set[str] = set()
    for tp in tps:
        txn_id = client.own(transactional_id(link_id, tp.topic, tp.partition))
        if txn_id in fenced:
            continue
        fenced.add(txn_id)
        producer = Producer(client.producer(**{"transactional.id": txn_id}))
        try:
            producer.init_transactions(timeout)
        except KafkaException as exc:
            raise KafkaOperationError(client.name, f"fence link {link_id} on {tp.topic}[{tp.partition}]",
                                      exc.args[0]) from exc
        finally:
            producer.flush(1)


def attempt_checkpoints(target: ClusterClient, link_id: str, tps: list[TopicPartition], timeout: float,
                        stalled_after: float = STALLED_READ_S) -> dict[tuple[str, int], tuple[int | None, str]]:
    """The link's checkpoints, as a new attempt of its copy reads them (see the module).

    Only a read still waiting after ``stalled_after`` seconds fences (librdkafka retries the broker's
    UNSTABLE_OFFSET_COMMIT until the call's deadline); any other failure is raised as it is.
    """
    try:
        return read_checkpoints(target, link_id, tps, min(stalled_after, timeout))
    except KafkaOperationError as exc:
        if exc.code != KafkaError._TIMED_OUT or stalled_after >= timeout:
            raise
    log.warning("%s: its checkpoints on %s are held by an open transaction (an earlier attempt that died "
                "mid-copy); fencing it, which aborts that transaction, then reading them again",
                link_id, target.name)
    fence(target, link_id, tps, timeout)
    return read_checkpoints(target, link_id, tps, timeout)
