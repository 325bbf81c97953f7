"""Copy one source partition range to its target, exactly once.

This is what a Spark executor runs for each unit of work. The protocol
(DESIGN.md section 3, "Checkpoints"):

1. A transactional producer on the target with a ``transactional.id`` derived
   only from (link, topic, partition): one per transaction group of the topic
   (:mod:`mirrorflow.copy.txn_group`). ``init_transactions`` fences every older
   producer with that id (a zombie attempt, a retried Spark task) and completes
   or aborts its open transaction. A group's partitions are usually copied
   together (:mod:`mirrorflow.copy.group`); this module copies one partition,
   for ranges that need it and after a refused copy.
2. Only *after* fencing, read the link's checkpoint: the committed offset of the
   link's group on the target, for the same topic-partition (it exists on the
   target because topics are mirrored partition-for-partition). Nobody else can
   move it now.
3. Read the source with a ``read_committed`` consumer from that position up to
   the planned end, decide each message with the copy flags, produce the copies
   and, in the same transaction, ``send_offsets_to_transaction`` the next source
   offset. Commit. Copies and checkpoint become visible together or not at all.

A task killed anywhere leaves either the previous transaction (checkpoint and
copies) or the next one; never half. The next attempt fences, re-reads, goes on.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_END,
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from mirrorflow import copyflags
from mirrorflow.copy.clients import CopyClients, new_producer
from mirrorflow.copy.defaults import DEFAULT_TXN_RECORDS, TXN_SECONDS
from mirrorflow.copy.headers import CopyHeaders
from mirrorflow.copy.throttle import RateLimiter
from mirrorflow.kafka.admin import RETRIABLE_COORDINATOR
from mirrorflow.kafka.config import CONSUME_WAIT_S, ClusterClient

log = logging.getLogger(__name__)

#: errors meaning a cluster is not answering at all
UNREACHABLE_CODES = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT})

_FENCED_CODES = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


#: Checkpoint metadata written on a link's *old* target when the link is switched away
#: (see :mod:`mirrorflow.copy.switch`): a copier that still aims at that target stops.
SWITCHED_MARK = "mirrorflow:switched-to="


class LinkSwitchedAway(Exception):
    """The link's checkpoint on this target says the link now copies to another target."""

    def __init__(self, task: "PartitionTask", new_target: str) -> None:
        self.new_target = new_target
        super().__init__(f"link {task.link_id} was switched from {task.target} to {new_target}; this copy "
                         f"to {task.target} is stale and copies nothing (the next run uses {new_target})")


@dataclass(frozen=True)
class PartitionTask:
    """One unit of work planned by the driver."""

    link_id: str
    level: int
    source: str
    target: str
    topic: str
    partition: int
    #: Exclusive end: the source's last stable offset when the run was planned.
    end_offset: int
    max_records: int | None = None
    #: Records per transaction, at most: bounds what a crash has to redo.
    txn_records: int = DEFAULT_TXN_RECORDS
    #: Commit at least this often (seconds). Usually what ends a transaction: it keeps the
    #: commits' pauses a few percent of the copy at any message size, bounds in time what a
    #: crash redoes, and keeps a throttled or slow copy far inside ``transaction.timeout.ms``.
    txn_max_seconds: float = TXN_SECONDS
    #: Stop this run after about this many bytes (keys + values), at a transaction boundary.
    max_bytes: int | None = None
    #: This partition's share of the link's byte-rate cap.
    max_bytes_per_second: float | None = None
    #: The target topic's max.message.bytes, when the planner knows it.
    max_message_bytes: int | None = None
    on_malformed: copyflags.OnMalformed = "fresh"
    #: Onboarding only. Where to start when the link has no checkpoint yet (``EARLIEST``:
    #: the source's first offset); that start is committed as the checkpoint even when
    #: there is nothing to copy, so the regular link continues exactly there.
    start_offset: int | None = None
    #: Onboarding only. Copy *every* message, whatever its flags, adding these bits: a
    #: backfill brings history the new cluster never had, and the bits make sure the
    #: new cluster's own distributors never send it on (see mirrorflow.onboard).
    backfill_flags: int | None = None
    #: Onboarding only. Restore ``[start, end)`` from the S3 archive of the source cluster
    #: before reading Kafka: ``{"location": ArchiveLocation dict, "end": next archived offset}``.
    restore: dict[str, Any] | None = None
    #: Fail (instead of warn) when the source no longer holds offsets this copy needs.
    require_contiguous: bool = False
    #: The planner's estimate of the records this range holds (0: not estimated). The executor
    #: copies large ranges one at a time per Spark task (mirrorflow.copy.executor).
    planned_records: int = 0
    #: ``False`` (``replication`` key ``exactly_once: false``): at-least-once copies. No
    #: transactions: an idempotent producer, and the checkpoint committed once every copy
    #: before it is acknowledged. A killed or failed copy repeats up to one commit interval
    #: (``txn_records``, or ``txn_max_seconds`` of copying) on the next run, and nothing
    #: fences a zombie attempt.
    exactly_once: bool = True


#: ``PartitionTask.start_offset`` meaning "the source's earliest offset when the copy starts".
EARLIEST = -1


@dataclass
class PartitionResult:
    link_id: str
    source: str
    target: str
    topic: str
    partition: int
    start_offset: int = -1
    next_offset: int = -1
    end_offset: int = -1
    copied: int = 0
    skipped: int = 0
    malformed: int = 0
    bytes: int = 0
    checksum: int = 0
    #: The target offsets the copies were written between: the partition's end offset before
    #: the first copy and its last offset after the last commit (other producers' messages and
    #: transaction markers may share the span). ``None``: nothing copied, or the target did not say.
    target_first_offset: int | None = None
    target_last_offset: int | None = None
    #: Offsets the source deleted (retention) before this link copied them.
    lost_to_retention: int = 0
    #: Records restored from the S3 archive (onboarding with ``backfill: archive``).
    restored: int = 0
    #: The checkpoint this copy started without one and committed (onboarding hand-over).
    initialised: bool = False
    transactions: int = 0
    duration_s: float = 0.0
    #: Seconds spent waiting for the byte-rate cap.
    throttled_s: float = 0.0
    error: str | None = None
    error_offset: int | None = None
    error_code: int | None = None
    fenced: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Abort(Exception):
    """A delivery failed: the open transaction must be aborted."""


@dataclass
class _Batch:
    """What the open transaction's delivery callbacks found: the lowest refused span, or nothing.

    ``first_error`` is ``(span, error)``; ``span`` is ``[first, end]`` of the consumed chunk
    the refused copy came from (``end`` is -1 while that chunk is still being produced).
    """

    first_error: tuple[list[int], KafkaError] | None = None


def copy_partition(task: PartitionTask, source: ClusterClient, target: ClusterClient,
                   *, idle_timeout: float = 30.0, op_timeout: float = 30.0,
                   clients: CopyClients | None = None, carry: PartitionResult | None = None) -> PartitionResult:
    """Copy ``task``'s partition from its checkpoint to ``task.end_offset``; never raises for data errors.

    Errors are reported in the result (with the source offset where the
    partition stopped) so the caller can let other partitions finish.
    ``clients``: the calling thread's clients kept from its previous range
    (see :mod:`mirrorflow.copy.clients`); without it the copy opens and closes its own.
    ``carry``: the result of this run's earlier copy of the same partition (a transaction
    group's, :mod:`mirrorflow.copy.group`), continued here: counts, checksum and spans add up.
    """
    result = carry if carry is not None else PartitionResult(task.link_id, task.source, task.target, task.topic,
                                                             task.partition, end_offset=task.end_offset)
    started = time.monotonic()
    abandoned = False  # a producer call still blocked in a helper thread (see _bounded): never touch it again
    unexpected = False
    pool = clients if clients is not None else CopyClients()
    producer = pool.producer(task, target)
    checkpoint = pool.checkpoint(task, target)
    reader, kept_reader = pool.reader(task, source)
    try:
        if task.exactly_once:
            producer.init_transactions(op_timeout)
        start = committed = _checkpoint(checkpoint, task, op_timeout)
        low, _ = reader.get_watermark_offsets(TopicPartition(task.topic, task.partition), timeout=op_timeout)
        if start is None and task.start_offset is not None:
            start = low if task.start_offset == EARLIEST else task.start_offset
            result.initialised = True
        if task.restore is not None and start is not None and start < int(task.restore["end"]):
            start = _restore(task, producer, checkpoint, start, result, idle_timeout, op_timeout)
            if result.error is not None:
                return result
        if start is None or start < low:
            if start is not None:
                result.lost_to_retention = low - start
                what = (f"offsets {start}..{low - 1} are no longer on {task.source} (retention) and were "
                        f"not copied")
                if task.require_contiguous:
                    result.start_offset = result.next_offset = start
                    result.error = f"{what}; nothing copied past them (the archive must reach offset {low})"
                    result.error_offset = start
                    return result
                log.warning("%s %s[%d]: %s", task.link_id, task.topic, task.partition, what)
            start = low
        if result.start_offset < 0:
            result.start_offset = start
        result.next_offset = start
        end = task.end_offset
        if task.max_records is not None:
            end = min(end, start + task.max_records)
        result.end_offset = end
        if start < end:
            span_end = _copy_range(task, producer, checkpoint, reader, start, end, result, idle_timeout,
                                   op_timeout, kept_reader=kept_reader)
            if span_end is not None:
                producer = _find_refused(task, target, producer, checkpoint, reader, result, span_end, end,
                                         idle_timeout, op_timeout, kept_reader)
        elif committed is None and result.initialised and result.transactions == 0:
            _commit_position(task, producer, checkpoint, start, op_timeout)  # hand-over point, nothing to copy
            result.transactions += 1
        if result.error_offset is not None and result.error_offset > result.next_offset:
            # The refused copy aborted its whole transaction: copy again up to it, then stop there.
            error, error_offset, error_code = result.error, result.error_offset, result.error_code
            log.info("%s %s[%d]: copying %d..%d, up to the refused message", task.link_id, task.topic,
                     task.partition, result.next_offset, error_offset)
            producer = _fresh_producer(producer, task, target, op_timeout)
            result.error = result.error_offset = result.error_code = None
            _copy_range(task, producer, checkpoint, reader, result.next_offset, error_offset, result,
                        idle_timeout, op_timeout, kept_reader=kept_reader)
            if result.error is None:
                result.error, result.error_offset, result.error_code = error, error_offset, error_code
    except KafkaException as exc:
        err = exc.args[0]
        result.error = f"{err.name()}: {err.str()}"
        result.error_code = err.code()
        result.fenced = err.code() in _FENCED_CODES or err.fatal()
        result.error_offset = result.next_offset
        abandoned = getattr(exc, "abandoned", False)
    except LinkSwitchedAway as exc:
        result.error = str(exc)
        result.fenced = True
    except BaseException:
        unexpected = True  # the caller reports it; the clients may be mid-range, so none is kept
        raise
    finally:
        pool.release(task, source, target, reader=reader, checkpoint=checkpoint, producer=producer,
                     clean=result.error is None and not abandoned and not unexpected, abandoned=abandoned)
        if clients is None:
            pool.close()
        result.duration_s = round(time.monotonic() - started, 3)
    return result




def _restore(task: PartitionTask, producer: Producer, checkpoint: Consumer, start: int, result: PartitionResult,
             idle_timeout: float, op_timeout: float) -> int:
    """Copy ``[start, restore end)`` from the S3 archive, through the same transactions as Kafka data."""
    from mirrorflow.onboard.restore import ArchiveSource  # executor side; only onboarding needs boto3

    end = int(task.restore["end"])  # type: ignore[index]
    log.info("%s %s[%d]: restoring offsets %d..%d of %s from the archive", task.link_id, task.topic,
             task.partition, start, end - 1, task.source)
    result.start_offset = result.next_offset = start
    before = result.copied + result.skipped
    source = ArchiveSource(task.restore, task.source, task.topic, task.partition, start, end)  # type: ignore[arg-type]
    _copy_range(task, producer, checkpoint, source, start, end, result, idle_timeout, op_timeout)
    result.restored = result.copied + result.skipped - before
    return result.next_offset


#: Refusals of a whole record batch: one message per request goes through.
_BATCH_TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})


def _find_refused(task: PartitionTask, target: ClusterClient, producer: Producer, checkpoint: Consumer,
                  reader: Consumer, result: PartitionResult, span_end: int, end: int, idle_timeout: float,
                  op_timeout: float, kept_reader: bool) -> Producer:
    """After a refused copy somewhere in ``[result.error_offset, span_end)``: find it, or get past the failure.

    Delivery reports come only for failures (``delivery.report.only.error``: a report
    per copy cost about a fifth of the copier's CPU at 100 B), so a refusal is known
    only to the chunk of up to 500 consumed messages its copy came from. The target
    may also have refused the whole batch around it (a record batch too large, say).
    So: copy again what precedes the chunk, batched (the aborted transaction took it
    along); then the chunk one message per request, where a refusal that repeats
    stops at its exact offset. If the chunk goes through, the rest is copied batched,
    or, when the target refused a batch as too large (its limit was unknown to the
    planner), one message per request to the end. A second failure there is reported
    as it is, at the start of its own chunk. Returns the producer in use (each attempt
    after an abort starts a fresh one).
    """
    error, code, chunk = result.error, result.error_code, result.error_offset
    log.info("%s %s[%d]: the target refused a copy of source offsets %d..%d (%s); looking for it one message "
             "at a time", task.link_id, task.topic, task.partition, chunk, span_end - 1, error)
    result.error = result.error_offset = result.error_code = None
    steps: list[tuple[int, int, bool]] = [(result.next_offset, chunk, False), (chunk, span_end, True)]
    for first, last, one_by_one in steps:
        if first >= last:
            continue
        producer = _fresh_producer(producer, task, target, op_timeout)
        _copy_range(task, producer, checkpoint, reader, result.next_offset, last, result, idle_timeout,
                    op_timeout, one_by_one=one_by_one, kept_reader=kept_reader)
        if result.error is not None:
            return producer  # exact (one at a time), or a new failure where it is
    batch_too_large = code in _BATCH_TOO_LARGE
    log.info("%s %s[%d]: source offsets %d..%d went through one at a time: %s; copying on from %d%s",
             task.link_id, task.topic, task.partition, chunk, span_end - 1,
             "the target refuses batches this large" if batch_too_large else f"the refusal ({error}) did not repeat",
             result.next_offset, ", one message per request" if batch_too_large else "")
    if result.next_offset < end:
        _copy_range(task, producer, checkpoint, reader, result.next_offset, end, result, idle_timeout,
                    op_timeout, one_by_one=batch_too_large, kept_reader=kept_reader)
    return producer


def _commit_position(task: PartitionTask, producer: Producer, checkpoint: Consumer, offset: int,
                     timeout: float) -> None:
    """Commit ``offset`` as the link's checkpoint in an otherwise empty transaction (fenced like a copy)."""
    commits = _Commits(task, producer, checkpoint, timeout)
    commits.begin()
    commits.commit(offset)


def _fresh_producer(old: Producer, task: PartitionTask, target: ClusterClient, timeout: float) -> Producer:
    """A new producer (new epoch) after an aborted transaction whose delivery failed.

    Reusing the producer after such an abort left later messages stuck in its
    queue (seen with librdkafka 2.16); a fresh ``init_transactions`` is clean.
    """
    old.flush(timeout)
    producer = new_producer(task, target)
    if task.exactly_once:
        producer.init_transactions(timeout)
    return producer


def _checkpoint(consumer: Consumer, task: PartitionTask, timeout: float) -> int | None:
    """The link's committed position; retried while the group coordinator moves or loads."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            tp = consumer.committed([TopicPartition(task.topic, task.partition)], timeout=timeout)[0]
            if tp.error is not None:
                raise KafkaException(tp.error)
            if tp.metadata and tp.metadata.startswith(SWITCHED_MARK):
                raise LinkSwitchedAway(task, tp.metadata[len(SWITCHED_MARK):])
            return None if tp.offset == OFFSET_INVALID or tp.offset < 0 else tp.offset
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() not in RETRIABLE_COORDINATOR or time.monotonic() > deadline:
                raise
            log.info("%s %s[%d]: reading the checkpoint: %s; retrying", task.link_id, task.topic,
                     task.partition, err.name())
            time.sleep(0.2)  # back-off between retries of a retriable error


def _copy_range(task: PartitionTask, producer: Producer, checkpoint: Consumer, reader: Consumer,
                start: int, end: int, result: PartitionResult, idle_timeout: float, op_timeout: float,
                one_by_one: bool = False, kept_reader: bool = False) -> int | None:
    """Copy [start, end) in transactions of ``task.txn_records`` or ``task.txn_max_seconds``, whichever comes first.

    ``one_by_one`` waits for each copy's acknowledgement before the next (one
    message per request): slow, used only to find the message a target refuses.
    ``kept_reader``: the reader copied another range before, so anything it still
    hands over for another partition (even an end-of-partition event) is ignored.

    Returns ``None``, or after a refused copy that is not pinpointed (batched),
    the end of the source span it lies in; ``result.error_offset`` is the span's start.
    """
    txn = _Commits(task, producer, checkpoint, op_timeout)
    reader.assign([TopicPartition(task.topic, task.partition, start)])
    position = start
    batch = _Batch()
    in_txn = 0
    txn.begin()
    last_progress = txn_started = time.monotonic()
    crc = result.checksum
    limiter = RateLimiter(task.max_bytes_per_second) if task.max_bytes_per_second else None
    # The time bound on a transaction is checked once per fetched batch, and per record when a
    # batch can take longer than the transaction may stay open (throttled, or one copy at a time).
    slow = limiter is not None or one_by_one

    before = _target_end(checkpoint, task, op_timeout) if result.target_first_offset is None else None
    copied_before = result.copied

    def commit(next_offset: int) -> None:
        nonlocal batch, in_txn, txn_started
        unacknowledged = producer.flush(op_timeout)
        if batch.first_error is not None:
            raise _Abort()
        txn.require_acknowledged(unacknowledged)
        txn.commit(next_offset)
        result.transactions += 1
        result.next_offset = next_offset
        result.checksum = crc
        batch = _Batch()
        in_txn = 0
        txn_started = time.monotonic()

    headers_of = CopyHeaders(task.source, task.topic, task.partition, level=task.level,
                             backfill_flags=task.backfill_flags, on_malformed=task.on_malformed).for_copy
    topic, partition, txn_records, max_bytes = task.topic, task.partition, task.txn_records, task.max_bytes
    copied = skipped = malformed = size_total = 0  # since the last commit; folded into result there

    def fold() -> None:
        nonlocal copied, skipped, malformed, size_total
        result.copied += copied
        result.skipped += skipped
        result.malformed += malformed
        result.bytes += size_total
        copied = skipped = malformed = size_total = 0

    try:
        while position < end:
            # Ask for no more than the range still needs: consume() returns as soon as it has that
            # many, instead of waiting out CONSUME_WAIT_S at the end of every range.
            msgs = reader.consume(num_messages=max(1, min(500, end - position)), timeout=CONSUME_WAIT_S)
            now = time.monotonic()
            if not msgs:
                if now - last_progress > idle_timeout:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                                    f"no progress reading the source for {idle_timeout:.0f}s at "
                                                    f"offset {position} (planned end {end})"))
                continue
            progressed = False
            span = [position, -1]  # the source offsets this chunk's copies come from, for a refusal

            # One callback per chunk, not per copy: the producer reports failures only.
            def refused(err: KafkaError | None, msg, span: list[int] = span) -> None:
                if err is not None and (batch.first_error is None or span[0] < batch.first_error[0][0]):
                    batch.first_error = (span, err)

            for msg in msgs:
                if kept_reader:
                    msg_topic = msg.topic()
                    if msg_topic is not None and (msg.partition() != partition or msg_topic != topic):
                        continue  # the kept reader's previous range: never this range's data or end
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= end:  # only markers or aborted records remain before end
                            position = end
                        continue
                    raise KafkaException(err)
                offset = msg.offset()
                if offset < position:
                    continue  # re-delivered after an offset reset: already handled, never copy twice
                if offset >= end:
                    position = end
                    break
                progressed = True
                out_headers, problem = headers_of(msg.headers(), offset)
                if problem is not None:
                    malformed += 1
                    log.warning("%s %s[%d]@%d: %s", task.link_id, topic, partition, offset, problem)
                if out_headers is not None:
                    key, value = msg.key(), msg.value()
                    ts_type, ts = msg.timestamp()
                    timestamp = 0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts  # 0: the producer's clock
                    # The callback is a Python function, not a C-level callable such as functools.partial:
                    # confluent-kafka may call it while a fatal error (fenced) is pending; a C-level callable
                    # turns that into a SystemError that hides the fencing, a Python one lets flush() raise
                    # the KafkaException itself.
                    try:
                        producer.produce(topic, value, key, partition=partition, on_delivery=refused,
                                         timestamp=timestamp, headers=out_headers)
                    except (BufferError, KafkaException):  # local queue full, or refused: the careful path
                        _produce(producer, topic, key, value,
                                 {"partition": partition, "headers": out_headers, "timestamp": timestamp},
                                 refused, offset)
                    if one_by_one:
                        producer.flush(op_timeout)
                        if batch.first_error is not None:
                            batch.first_error = ([offset, offset + 1], batch.first_error[1])  # exactly this one
                            raise _Abort()
                    size = len(key or b"") + len(value or b"")
                    copied += 1
                    size_total += size
                    crc = zlib.crc32(value or b"", zlib.crc32(key or b"", crc))
                    if limiter is not None:
                        result.throttled_s += limiter.acquire(size)
                else:
                    skipped += 1
                position = offset + 1
                in_txn += 1
                if max_bytes is not None and result.bytes + size_total >= max_bytes:
                    end = position  # this run's byte budget is spent: commit and stop here
                    break
                if in_txn >= txn_records or (slow and time.monotonic() - txn_started >= task.txn_max_seconds):
                    commit(position)
                    fold()
                    txn.begin()
            span[1] = position
            if progressed:
                last_progress = now
            if in_txn and time.monotonic() - txn_started >= task.txn_max_seconds:
                commit(position)
                fold()
                txn.begin()
        if in_txn or position != result.next_offset:
            commit(position)
        else:  # the range ended on a transaction boundary: the open transaction is empty
            txn.close_empty()
        fold()
        result.throttled_s = round(result.throttled_s, 3)
        if result.copied > copied_before:
            _note_target_offsets(result, before, _target_end(checkpoint, task, op_timeout))
    except _Abort:
        txn.abort()
        (first, span_end), err = batch.first_error  # type: ignore[misc]
        span_end = position if span_end < 0 else span_end  # refused before its chunk was all produced
        result.error_offset = first
        result.error_code = err.code()
        if span_end - first <= 1:
            result.error = f"{err.name()}: {err.str()} (producing the copy of source offset {first})"
            return None
        result.error = (f"{err.name()}: {err.str()} (producing a copy of one of source offsets "
                        f"{first}..{span_end - 1})")
        return span_end
    except _ProduceRejected as exc:
        # Commit what precedes the message the target refuses, then stop at it.
        commit(exc.offset)
        fold()
        if result.copied > copied_before:
            _note_target_offsets(result, before, _target_end(checkpoint, task, op_timeout))
        result.error = exc.reason
        result.error_offset = exc.offset
    except _TargetSilent:
        # An abort would only time out as well. The open transaction is aborted by the
        # target's coordinator (transaction.timeout.ms) or fenced by the next attempt's
        # init_transactions with the same transactional.id; either way nothing of it shows.
        raise
    except KafkaException:
        try:
            txn.abort()
        except KafkaException:
            pass  # fenced or fatal: the next attempt's init_transactions cleans up
        raise


def _target_end(checkpoint: Consumer, task: PartitionTask, timeout: float) -> int | None:
    """The target partition's end offset (high watermark), for the audit line; ``None`` if it does not say.

    The audit gives the span of target offsets a copy wrote in. The producer reports
    failures only, so the span comes from the end offsets before the first copy and
    after the last commit: two requests per range instead of a report per copy.
    """
    return _target_ends(checkpoint, task, [task.partition], timeout)[task.partition]


def _target_ends(checkpoint: Consumer, task: PartitionTask, partitions: list[int], timeout: float
                 ) -> dict[int, int | None]:
    """:func:`_target_end` of several partitions of ``task``'s topic in one request per leader.

    Why one request: a transaction group reads 16 of them before and after its copy, and
    asked one at a time they took a quarter of a 64-partition copy's time (docs/benchmarks.md).
    ``offsets_for_times`` with ``OFFSET_END`` answers what ``get_watermark_offsets`` does
    (the end a reader of the consumer's isolation level sees), for many partitions at once.
    """
    out: dict[int, int | None] = dict.fromkeys(partitions)
    try:
        answer = checkpoint.offsets_for_times([TopicPartition(task.topic, p, OFFSET_END) for p in partitions],
                                              timeout=timeout)
    except KafkaException as exc:
        log.warning("%s %s%s: the target's end offsets, for the audit, are unknown: %s", task.link_id,
                    task.topic, partitions, exc.args[0])
        return out
    for tp in answer:
        if tp.error is not None or tp.offset < 0:
            log.warning("%s %s[%d]: the target's end offset, for the audit, is unknown: %s", task.link_id,
                        task.topic, tp.partition, tp.error or f"offset {tp.offset}")
        else:
            out[tp.partition] = tp.offset
    return out


def _note_target_offsets(result: PartitionResult, before: int | None, after: int | None) -> None:
    """Widen the result's target span to ``[before, after - 1]``; a bound the target did not give stays unknown."""
    if result.target_first_offset is None and before is not None:
        result.target_first_offset = before
    if after is not None:
        result.target_last_offset = after - 1


class _Commits:
    """How a copy makes its copies and its checkpoint durable, for both delivery settings.

    Exactly once: the copies and the checkpoint go in one transaction on the target.
    At least once: the copies are acknowledged (the caller flushes first), then the
    checkpoint is committed by the link's group; a crash between the two repeats
    the copies since the previous commit.
    """

    def __init__(self, task: PartitionTask, producer: Producer, checkpoint: Consumer, timeout: float) -> None:
        self.task, self.producer, self.checkpoint, self.timeout = task, producer, checkpoint, timeout
        self.group_meta = checkpoint.consumer_group_metadata() if task.exactly_once else None

    def begin(self) -> None:
        if self.task.exactly_once:
            self.producer.begin_transaction()

    def commit(self, next_offset: int) -> None:
        self.commit_positions([TopicPartition(self.task.topic, self.task.partition, next_offset)])

    def require_acknowledged(self, unacknowledged: int) -> None:
        """After the flush before a commit: copies still unacknowledged mean the target stopped answering.

        Fail now instead of spending another timeout on each transactional call that would follow.
        """
        if unacknowledged:
            raise _TargetSilent(KafkaError(KafkaError._TIMED_OUT,
                                           f"{unacknowledged} copies not acknowledged by target {self.task.target} "
                                           f"within {self.timeout:.0f}s"))

    def commit_positions(self, position: list[TopicPartition]) -> None:
        """Commit the next source offsets of one or more partitions (a transaction group's, see mirrorflow.copy.group).

        A target that does not answer fails as :class:`_TargetSilent`.
        """
        try:
            self._commit_positions(position)
        except _TargetSilent:
            raise
        except KafkaException as exc:
            if exc.args[0].code() in UNREACHABLE_CODES:
                raise _TargetSilent(exc.args[0]) from exc
            raise

    def _commit_positions(self, position: list[TopicPartition]) -> None:
        task, timeout = self.task, self.timeout
        if not task.exactly_once:
            _bounded(lambda: self.checkpoint.commit(offsets=position, asynchronous=False), timeout,
                     "commit (checkpoint)", task.target)
            return
        _bounded(lambda: self.producer.send_offsets_to_transaction(position, self.group_meta, timeout),
                 timeout, "send_offsets_to_transaction", task.target)
        _bounded(lambda: self.producer.commit_transaction(timeout), timeout, "commit_transaction", task.target)

    def close_empty(self) -> None:
        """End the open transaction, which holds nothing (the range ended on a commit)."""
        if self.task.exactly_once:
            self.producer.commit_transaction(self.timeout)

    def abort(self) -> None:
        if self.task.exactly_once:
            self.producer.abort_transaction(self.timeout)


class _TargetSilent(KafkaException):
    """The target did not answer a transactional step in time.

    ``abandoned``: a call is still blocked inside the producer, which must not be
    used again (not even flushed); it is left to finish or to be collected.
    """

    abandoned = False


#: Grace beyond the call's own timeout before the caller stops waiting for it.
_CALL_GRACE_S = 5.0


def _bounded(call, timeout: float, what: str, target: str):
    """Run a transactional producer call under a deadline of our own.

    librdkafka's ``send_offsets_to_transaction`` can block far past its timeout
    when the target's coordinator dies during the call (librdkafka issue 5456:
    the coordinator request's timeout is never checked). A copy must fail, not
    hang, so the call runs in a helper thread; if it has not returned by
    ``timeout`` plus a grace period, the partition fails as "target silent" and
    the producer is abandoned to that thread. Nothing of the open transaction
    becomes visible: the abandoned thread never commits, so the coordinator
    aborts it on ``transaction.timeout.ms`` or the next attempt's
    ``init_transactions`` (same ``transactional.id``) fences it.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    helper = threading.Thread(target=run, name=f"mirrorflow-{what}", daemon=True)
    helper.start()
    helper.join(timeout + _CALL_GRACE_S)
    if helper.is_alive():
        silent = _TargetSilent(KafkaError(KafkaError._TIMED_OUT,
                                          f"{what} on target {target} did not return within "
                                          f"{timeout + _CALL_GRACE_S:.0f}s; the producer is abandoned"))
        silent.abandoned = True
        raise silent
    if "error" in box:
        raise box["error"]
    return box.get("result")


class _ProduceRejected(Exception):
    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


def _produce(producer: Producer, topic: str, key, value, args: dict[str, Any], on_delivery, offset: int) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **args)
            return
        except BufferError:
            producer.poll(0.1)  # local queue full: serve delivery reports, then retry
        except KafkaException as exc:
            err = exc.args[0]
            raise _ProduceRejected(offset, f"{err.name()}: {err.str()} (source offset {offset}, "
                                           f"{len(key or b'') + len(value or b'')} bytes)") from exc
