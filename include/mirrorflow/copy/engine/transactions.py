"""How a copy makes its copies and its checkpoint durable, and how it survives a target that stops answering.

Shared by the per-partition copy (:mod:`mirrorflow.copy.engine.partition`) and the
transaction-group copy (:mod:`mirrorflow.copy.engine.group`): both write copies through
one producer and end each batch with :meth:`Commits.commit_positions`, which is
the only place a link's checkpoint moves during a copy (docs/architecture.md,
"Checkpoints and exactly-once").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mirrorflow.copy.engine.clients import new_producer
from mirrorflow.copy.state.checkpoints import CheckpointMeta, checkpoint_group
from mirrorflow.copy.state.held import Held
from mirrorflow.copy.state.history import LastRead
from mirrorflow.copy.task import PartitionTask
from mirrorflow.kafka import UNREACHABLE_CODES, CallAbandoned, ClusterClient, within


class TargetSilent(KafkaException):
    """The target did not answer a transactional step in time.

    ``abandoned``: a call is still blocked inside the producer, which must not be
    used again (not even flushed); it is left to finish or to be collected.
    """

    abandoned = False


class ProduceRejected(Exception):
    """The producer refused one copy locally (too large, say): the copy stops exactly at ``offset``."""

    def __init__(self, offset: int, reason: str, size: int | None = None) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        #: The record's key and value bytes, when the producer refused it.
        self.size = size


class Commits:
    """How a copy makes its copies and its checkpoint durable, for both delivery settings.

    Exactly once: the copies and the checkpoint go in one transaction on the target.
    At least once: the copies are acknowledged (the caller flushes first), then the
    checkpoint is committed by the link's group; a crash between the two repeats
    the copies since the previous commit.
    """

    def __init__(self, task: PartitionTask, producer: Producer, checkpoint: Consumer, timeout: float,
                 held: Mapping[int, Held | None] | None = None) -> None:
        self.task, self.producer, self.checkpoint, self.timeout = task, producer, checkpoint, timeout
        #: Per partition, what the target holds already after a recreated source (mirrorflow.copy.state.held):
        #: each checkpoint keeps the floors not read past yet.
        self.held = {p: h for p, h in (held or {}).items() if h is not None}
        self.group_meta = checkpoint.consumer_group_metadata() if task.exactly_once else None
        # Every checkpoint says which incarnations of the topics it belongs to (when the planner knew them),
        # which record the link read last before it (mirrorflow.copy.state.history), and when it was committed.
        self.meta = CheckpointMeta(task.source_topic_id, task.target_topic_id)

    def begin(self) -> None:
        if self.task.exactly_once:
            self.producer.begin_transaction()

    def commit(self, next_offset: int, last: LastRead | None = None) -> None:
        self.commit_positions([TopicPartition(self.task.target_topic, self.task.partition, next_offset)],
                              {self.task.partition: last})

    def require_acknowledged(self, unacknowledged: int) -> None:
        """After the flush before a commit: copies still unacknowledged mean the target stopped answering.

        Fail now instead of spending another timeout on each transactional call that would follow.
        """
        if unacknowledged:
            raise TargetSilent(KafkaError(KafkaError._TIMED_OUT,
                                          f"{unacknowledged} copies not acknowledged by target {self.task.target} "
                                          f"within {self.timeout:.0f}s"))

    def metadata(self, last: LastRead | None, partition: int | None = None) -> str:
        """The metadata committed with ``partition``'s checkpoint whose last record read is ``last``."""
        held = self.held.get(self.task.partition if partition is None else partition)
        return self.meta.committed_now(last, held.floors() if held is not None else ()).encode()

    def commit_positions(self, position: list[TopicPartition], lasts: dict[int, LastRead | None] | None = None) -> None:
        """Commit the next source offsets of one or more partitions (a transaction group's).

        ``lasts``: per partition, the last record read before its new checkpoint.
        A target that does not answer fails as :class:`TargetSilent`.
        """
        try:
            self._commit_positions(position, lasts or {})
            for tp in position:
                if (held := self.held.get(tp.partition)) is not None:
                    held.settle()
        except TargetSilent:
            raise
        except KafkaException as exc:
            if exc.args[0].code() in UNREACHABLE_CODES:
                raise TargetSilent(exc.args[0]) from exc
            raise

    def _commit_positions(self, position: list[TopicPartition], lasts: dict[int, LastRead | None]) -> None:
        task, timeout = self.task, self.timeout
        position = [TopicPartition(tp.topic, tp.partition, tp.offset,
                                   self.metadata(lasts.get(tp.partition), tp.partition)) for tp in position]
        if not task.exactly_once:
            bounded(lambda: self.checkpoint.commit(offsets=position, asynchronous=False), timeout,
                    "commit (checkpoint)", task.target)
            return
        bounded(lambda: self.producer.send_offsets_to_transaction(position, self.group_meta, timeout),
                timeout, "send_offsets_to_transaction", task.target)
        bounded(lambda: self.producer.commit_transaction(timeout), timeout, "commit_transaction", task.target)

    def close_empty(self) -> None:
        """End the open transaction, which holds nothing (the range ended on a commit)."""
        if self.task.exactly_once:
            self.producer.commit_transaction(self.timeout)

    def failure(self) -> KafkaError | None:
        """Why the open transaction failed, when its copies came back purged.

        A transaction that failed (the coordinator refused a partition, say) purges its
        copies, and their delivery reports only say "purged". Asked to commit, a failed
        transaction commits nothing and answers with its error: that is the cause.
        Call it only after a purge, when the transaction is known to have failed.
        """
        if not self.task.exactly_once:
            return None
        try:
            self.producer.commit_transaction(self.timeout)
        except KafkaException as exc:
            return exc.args[0]
        return None

    def abort(self) -> None:
        for held in self.held.values():
            held.forget()
        if self.task.exactly_once:
            self.producer.abort_transaction(self.timeout)


def commit_position(task: PartitionTask, producer: Producer, checkpoint: Consumer, offset: int,
                    timeout: float, last: LastRead | None = None, held: Held | None = None) -> None:
    """Commit ``offset`` as the link's checkpoint in an otherwise empty transaction (fenced like a copy)."""
    commits = Commits(task, producer, checkpoint, timeout, {task.partition: held})
    commits.begin()
    commits.commit(offset, last)


def fenced_commit(task: PartitionTask, target: ClusterClient, positions: list[TopicPartition],
                  lasts: dict[int, LastRead | None] | None, timeout: float,
                  held: Mapping[int, Held | None] | None = None) -> None:
    """Commit checkpoints from outside a copy (an operator's decision, a carry-over) through the link's own
    ``transactional.id``: ``init_transactions`` fences any copy still running, so none can overwrite them.
    ``held``: floors a checkpoint keeps (mirrorflow.copy.state.held)."""
    producer = new_producer(task, target)
    checkpoint = Consumer(target.consumer(target.own(checkpoint_group(task.link_id))))
    try:
        producer.init_transactions(timeout)
        commits = Commits(task, producer, checkpoint, timeout, held)
        commits.begin()
        commits.commit_positions(positions, lasts)
    finally:
        checkpoint.close()
        producer.flush(timeout)


def flush(producer: Producer, timeout: float) -> int:
    """``producer.flush(timeout)``: how many copies are still unacknowledged; the error confluent-kafka can lose.

    When a fatal error (most often: another attempt of the link fenced this
    producer's ``transactional.id``) reaches ``flush`` while it serves delivery
    reports, confluent-kafka 2.16 can raise ``SystemError: ... returned NULL without
    setting an exception`` instead of the error. A copy must say what happened and be
    handled as fenced, so it is raised as the fatal error it stands for.
    """
    try:
        return int(producer.flush(timeout))
    except SystemError as exc:
        raise KafkaException(KafkaError(
            KafkaError._FATAL, f"the producer failed fatally while flushing its copies, most often because another "
            f"attempt of this link fenced it (same transactional.id); confluent-kafka lost the error ({exc})",
            fatal=True)) from exc


def fresh_producer(old: Producer, task: PartitionTask, target: ClusterClient, timeout: float) -> Producer:
    """A new producer (new epoch) after an aborted transaction whose delivery failed.

    Reusing the producer after such an abort left later messages stuck in its
    queue (seen with librdkafka 2.16); a fresh ``init_transactions`` is clean.
    """
    old.flush(timeout)
    producer = new_producer(task, target)
    if task.exactly_once:
        producer.init_transactions(timeout)
    return producer


#: How long one wait of :func:`flush_unless_refused` lasts before it looks for a refusal again.
FLUSH_SLICE_S = 0.1


def flush_unless_refused(producer: Producer, timeout: float, refused: Callable[[], bool]) -> int:
    """:func:`flush`, but done as soon as ``refused()`` says a copy came back refused: how many are unacknowledged.

    Copies queued behind a batch the broker refused (one too large even compressed, say) are
    never sent: the transaction has failed. A plain flush waited for them until its timeout,
    30 s a refusal, and the abort that follows for their reports. So once a copy is refused,
    the copies still queued are purged (their reports say so, after the refusal's) and the
    flush ends with those in flight.
    """
    deadline = time.monotonic() + timeout
    while True:
        left = flush(producer, max(0.0, min(FLUSH_SLICE_S, deadline - time.monotonic())))
        if left and refused():
            producer.purge(in_queue=True, in_flight=False)
            return flush(producer, max(0.0, deadline - time.monotonic()))
        if left == 0 or time.monotonic() >= deadline:
            return left


def bounded(call: Callable[[], Any], timeout: float, what: str, target: str) -> Any:
    """Run a transactional producer call under a deadline of our own (:func:`mirrorflow.kafka.deadline.within`).

    librdkafka's ``send_offsets_to_transaction`` can block far past its timeout
    when the target's coordinator dies during the call (librdkafka issue 5456).
    If it has not returned in time, the partition fails as "target silent" and
    the producer is abandoned to the helper thread. Nothing of the open
    transaction becomes visible: the abandoned thread never commits, so the
    coordinator aborts it on ``transaction.timeout.ms`` or the next attempt's
    ``init_transactions`` (same ``transactional.id``) fences it.
    """
    try:
        return within(call, timeout, f"{what} on target {target}")
    except CallAbandoned as exc:
        silent = TargetSilent(KafkaError(KafkaError._TIMED_OUT,
                                         f"{exc.args[0].str()} (the producer is abandoned)"))
        silent.abandoned = True
        raise silent from None


def produce_carefully(producer: Producer, topic: str, key: bytes | None, value: bytes | None, args: dict[str, Any],
                      on_delivery: Callable[..., None], offset: int) -> None:
    """Produce one copy when the fast path could not: wait out a full local queue; name a local refusal.

    A local refusal (the copy is larger than the producer may send, say) raises
    :class:`ProduceRejected` with the source offset, so the copy stops exactly there.
    """
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **args)
            return
        except BufferError:
            producer.poll(0.1)  # local queue full: serve delivery reports, then retry
        except KafkaException as exc:
            err = exc.args[0]
            size = len(key or b'') + len(value or b'')
            raise ProduceRejected(offset, f"{err.name()}: {err.str()} (source offset {offset}, {size} bytes)",
                                  size) from exc
