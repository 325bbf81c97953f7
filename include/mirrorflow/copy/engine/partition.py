"""Copy one source partition range to its target, exactly once.

The protocol (docs/architecture.md, "Checkpoints and exactly-once"):

1. A transactional producer on the target with a ``transactional.id`` derived
   only from (link, topic, partition): one per transaction group of the topic
   (:mod:`mirrorflow.copy.txn_groups`). ``init_transactions`` fences every older
   producer with that id (a zombie attempt, a retried Spark task) and completes
   or aborts its open transaction. A group's partitions are usually copied
   together (:mod:`mirrorflow.copy.engine.group`); this module copies one partition,
   for ranges that need it and after a refused copy.
2. Only *after* fencing, read the link's checkpoint
   (:mod:`mirrorflow.copy.state.checkpoints`). Nobody else can move it now.
3. Read the source with a ``read_committed`` consumer from where the copy starts
   up to the planned end, decide each message with the copy flags, produce the
   copies and, in the same transaction, ``send_offsets_to_transaction`` the next
   source offset. Commit. Copies and checkpoint become visible together or not at all.

A task killed anywhere leaves either the previous transaction (checkpoint and
copies) or the next one; never half. The next attempt fences, re-reads, goes on.
"""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from mirrorflow.copy.engine.access import during, named, stage_of, unexplained
from mirrorflow.copy.engine.clients import CopyClients
from mirrorflow.copy.engine.spans import note_target_offsets, target_end
from mirrorflow.copy.engine.throttle import RateLimiter
from mirrorflow.copy.engine.transactions import (
    Commits,
    ProduceRejected,
    TargetSilent,
    commit_position,
    flush,
    flush_unless_refused,
    fresh_producer,
    produce_carefully,
)
from mirrorflow.copy.headers import CopyHeaders
from mirrorflow.copy.heal import NotProven, origin_source
from mirrorflow.copy.state import (
    Held,
    HeldUnknown,
    LastRead,
    LinkSwitchedAway,
    copy_start,
    held_at_start,
    last_read,
    moved_under_copy,
    read_positions,
    record_move,
    record_start,
    skipping_held,
    task_start,
    trusted_last,
    verify,
)
from mirrorflow.copy.task import PartitionResult, PartitionTask
from mirrorflow.errors import MalformedCopyFlags, UnreadableRecord
from mirrorflow.kafka import (
    CONSUME_WAIT_S,
    FENCED_CODES,
    SOURCE_MOVED_CODES,
    ClusterClient,
    read_headers,
    settled_watermarks,
)
from mirrorflow.progress import note

log = logging.getLogger(__name__)


def copy_partition(task: PartitionTask, source: ClusterClient, target: ClusterClient,
                   *, idle_timeout: float = 30.0, op_timeout: float = 30.0,
                   clients: CopyClients | None = None, carry: PartitionResult | None = None) -> PartitionResult:
    """Copy ``task``'s partition from its checkpoint to ``task.end_offset``; never raises for data errors.

    Errors are reported in the result (with the source offset where the
    partition stopped) so the caller can let other partitions finish.
    ``clients``: the calling thread's clients kept from its previous range
    (see :mod:`mirrorflow.copy.engine.clients`); without it the copy opens and closes its own.
    ``carry``: the result of this run's earlier copy of the same partition (a transaction
    group's, :mod:`mirrorflow.copy.engine.group`), continued here: counts, checksum and spans add up.
    """
    result = carry if carry is not None else PartitionResult(task.link_id, task.source, task.target, task.topic,
                                                             task.partition, end_offset=task.end_offset)
    started = time.monotonic()
    pool = clients if clients is not None else CopyClients()
    copy = _PartitionCopy(task, target, result, pool.producer(task, target), pool.checkpoint(task, target),
                          *pool.reader(task, source), idle_timeout=idle_timeout, op_timeout=op_timeout,
                          source=source)
    abandoned = unexpected = False  # abandoned: a producer call still blocked in a helper thread; never touch it
    try:
        copy.run()
    except KafkaException as exc:
        err = exc.args[0]
        refused = named(task, stage_of(exc), err, source, target)
        result.error = str(refused) if refused is not None else \
            unexplained(task, stage_of(exc), err, source, target)
        if refused is None and err.code() in SILENT_OR_GONE and topic_missing(copy.checkpoint, task.target_topic):
            result.error = target_gone(task, result.next_offset, f"{err.name()}: {err.str()}")
        result.error_code = err.code()
        result.fenced = err.code() in FENCED_CODES or err.fatal()
        result.error_offset = result.next_offset
        abandoned = getattr(exc, "abandoned", False)
    except LinkSwitchedAway as exc:
        result.error = str(exc)
        result.fenced = True
    except BaseException:
        unexpected = True  # the caller reports it; the clients may be mid-range, so none is kept
        raise
    finally:
        pool.release(task, source, target, reader=copy.reader, checkpoint=copy.checkpoint, producer=copy.producer,
                     clean=result.error is None and not abandoned and not unexpected, abandoned=abandoned)
        if clients is None:
            pool.close()
        result.duration_s = round(time.monotonic() - started, 3)
    return result


class _PartitionCopy:
    """One partition's copy in one run: where it starts, the ranges it copies, and how it gets past a refusal."""

    def __init__(self, task: PartitionTask, target: ClusterClient, result: PartitionResult, producer: Producer,
                 checkpoint: Consumer, reader: Consumer, kept_reader: bool, *, idle_timeout: float,
                 op_timeout: float, source: ClusterClient) -> None:
        self.task, self.source, self.target, self.result = task, source, target, result
        self.producer, self.checkpoint, self.reader, self.kept_reader = producer, checkpoint, reader, kept_reader
        self.idle_timeout, self.op_timeout = idle_timeout, op_timeout
        #: The last record read before the committed checkpoint (mirrorflow.copy.state.history).
        self.last: LastRead | None = None
        #: What the target holds already of what the link passes on, after a recreated source.
        self.held: Held | None = None

    def run(self) -> None:
        task, result = self.task, self.result
        if task.exactly_once:
            with during("start"):
                self.producer.init_transactions(self.op_timeout)
        with during("checkpoint"):
            committed, metadata = read_positions(self.checkpoint, task.link_id, task.target, task.target_topic,
                                                 [task.partition], self.op_timeout)[task.partition]
        with during("offsets"):
            low, _ = settled_watermarks(self.reader, TopicPartition(task.source_topic, task.partition),
                                        self.op_timeout)
        begin, set_aside_because = task_start(task, committed, metadata, low)
        first_position = begin.initialised  # the link has no checkpoint (here) yet: commit where it starts
        if begin.initialised:
            result.initialised = True
        self.last = trusted_last(begin, committed, metadata, set_aside_because)
        if task.restore is not None and begin.position is not None and begin.position < int(task.restore["end"]):
            self.last = None  # the archive's records are not compared with the source's
            self.restore(begin.position)
            if result.error is not None or result.next_offset >= task.end_offset:
                return  # stopped, or the task was the restore alone (mirror_resolve_gap)
            begin = copy_start(result.next_offset, low, require_contiguous=task.require_contiguous,
                               on_gap=task.on_gap, source=task.source)
        if not record_start(result, begin, set_aside_because):
            return
        try:
            self.held = held_at_start(task, metadata, set_aside_because)
        except HeldUnknown as exc:
            result.error, result.start_offset = str(exc), begin.offset
            result.next_offset = result.error_offset = begin.offset
            return
        start = begin.offset
        if result.start_offset < 0:
            result.start_offset = start
        result.next_offset = start
        end = task.end_offset if task.max_records is None else min(task.end_offset, start + task.max_records)
        result.end_offset = end
        if start < end and self.last is not None and self.last.offset >= low:
            diverged = verify(self.reader, task.link_id, task.source, task.source_topic, {task.partition: self.last},
                              self.op_timeout)
            if diverged:
                result.error, result.error_offset = diverged[task.partition], start
                result.diverged_at = self.last.offset
                log.error("%s %s[%d]: %s", task.link_id, task.topic, task.partition, result.error)
                return
        if start < end:
            span_end = self.copy_range(start, end)
            if span_end is not None:
                self.find_refused(span_end, end)
        elif result.transactions == 0 and (first_position or begin.lost or task.keep_alive):
            # Nothing to copy, but a position to keep: an onboarding hand-over, past a skipped gap, or
            # an idle link's checkpoint committed again before Kafka expires it.
            commit_position(task, self.producer, self.checkpoint, start, self.op_timeout, self.last, self.held)
            result.transactions += 1
            result.kept_alive = task.keep_alive and not (first_position or begin.lost)
        if result.error_offset is not None and result.error_offset > result.next_offset:
            self.copy_up_to_refusal()

    def copy_range(self, start: int, end: int, *, one_by_one: bool = False, reader: Any = None) -> int | None:
        """Copy ``[start, end)``; see :class:`_RangeCopy` for what it returns."""
        return _RangeCopy(self, reader if reader is not None else self.reader, one_by_one,
                          kept_reader=self.kept_reader and reader is None).run(start, end)

    def restore(self, start: int) -> None:
        """Copy ``[start, restore end)`` from the S3 archive, through the same transactions as Kafka data."""
        from mirrorflow.archive import ArchiveError, ArchiveSource  # executor side; only a restore needs boto3

        task, result = self.task, self.result
        assert task.restore is not None
        end = int(task.restore["end"])
        result.start_offset = result.next_offset = start
        before = result.copied + result.skipped
        try:
            if task.restore.get("by_origin"):
                self.restore_by_origin(start, end)
            else:
                log.info("%s %s[%d]: restoring offsets %d..%d of %s from its archive", task.link_id, task.topic,
                         task.partition, start, end - 1, task.source)
                archive = ArchiveSource(task.restore, task.source, task.topic, task.partition, start, end)
                self.copy_range(start, end, reader=archive)
        except (ArchiveError, NotProven) as exc:  # a hole, nothing proven, an unreadable object: stop, by name
            result.error, result.error_offset = str(exc), result.next_offset
            result.lost_to_retention, result.lost_offsets = end - result.next_offset, [result.next_offset, end - 1]
            result.lost_ranges = [result.lost_offsets]
            log.error("%s %s[%d]: %s", task.link_id, task.topic, task.partition, exc)
        result.restored = result.copied + result.skipped - before
        if result.next_offset > start:
            result.restored_offsets = [start, result.next_offset - 1]

    def restore_by_origin(self, start: int, end: int) -> None:
        """``[start, end)`` from other archives by provenance, in one transaction (mirrorflow.copy.heal.origin).

        One transaction, so that the checkpoint only ever moves from a real source
        offset to the gap's end: the next attempt computes the same set again.
        """
        task = self.task
        assert task.restore is not None
        reader, said = origin_source(self.source, self.target, task.level, task.topic, task.partition, start, end,
                                     task.restore, self.op_timeout)
        log.warning("%s %s[%d]: restoring what the link copies of offsets %d..%d of %s by provenance (%s)",
                    task.link_id, task.topic, task.partition, start, end - 1, task.source, said)
        self.task = replace(task, txn_records=end - start + 1, txn_max_seconds=float("inf"), max_bytes=None)
        try:
            self.copy_range(start, end, reader=reader)
        finally:
            self.task = task

    def find_refused(self, span_end: int, end: int) -> None:
        """After a refused copy somewhere in ``[result.error_offset, span_end)``: find it, or get past the failure.

        Delivery reports come only for failures, so a refusal is known only to the
        chunk of up to 500 consumed messages its copy came from, and the target may
        have refused the whole batch around it (a record batch too large, say). So:
        copy again what precedes the chunk, batched (the aborted transaction took it
        along); then the chunk one message per request, where a refusal that repeats
        stops at its exact offset. If the chunk goes through, the rest is copied
        batched, or, when the target refused a batch as too large (its limit was
        unknown to the planner), one message per request to the end. A second failure
        there is reported as it is, at the start of its own chunk.
        """
        task, result = self.task, self.result
        error, code, chunk = result.error, result.error_code, result.error_offset
        assert chunk is not None
        log.info("%s %s[%d]: the target refused a copy of source offsets %d..%d (%s); looking for it one message "
                 "at a time", task.link_id, task.topic, task.partition, chunk, span_end - 1, error)
        result.error = result.error_offset = result.error_code = None
        steps: list[tuple[int, int, bool]] = [(result.next_offset, chunk, False), (chunk, span_end, True)]
        for first, last, one_by_one in steps:
            if first >= last:
                continue
            self.producer = fresh_producer(self.producer, task, self.target, self.op_timeout)
            self.copy_range(result.next_offset, last, one_by_one=one_by_one)
            if result.error is not None:
                return  # exact (one at a time), or a new failure where it is
        batch_too_large = code in _BATCH_TOO_LARGE
        log.info("%s %s[%d]: source offsets %d..%d went through one at a time: %s; copying on from %d%s",
                 task.link_id, task.topic, task.partition, chunk, span_end - 1,
                 "the target refuses batches this large" if batch_too_large
                 else f"the refusal ({error}) did not repeat",
                 result.next_offset, ", one message per request" if batch_too_large else "")
        if result.next_offset < end:
            self.copy_range(result.next_offset, end, one_by_one=batch_too_large)

    def copy_up_to_refusal(self) -> None:
        """The refused copy aborted its whole transaction: copy again up to it, then stop there."""
        task, result = self.task, self.result
        error, error_offset, error_code = result.error, result.error_offset, result.error_code
        assert error_offset is not None
        log.info("%s %s[%d]: copying %d..%d, up to the refused message", task.link_id, task.topic,
                 task.partition, result.next_offset, error_offset)
        self.producer = fresh_producer(self.producer, task, self.target, self.op_timeout)
        result.error = result.error_offset = result.error_code = None
        self.copy_range(result.next_offset, error_offset)
        if result.error is None:
            result.error, result.error_offset, result.error_code = error, error_offset, error_code


def unreadable(task: PartitionTask, offset: int, exc: Exception) -> str:
    """Why the record at ``offset`` cannot be copied as it is (its partition stops there)."""
    where = f"{task.source} {task.topic}[{task.partition}] offset {offset}"
    if isinstance(exc, UnreadableRecord):
        return (f"the record at {where} has a header key that is not valid UTF-8, which the Kafka client cannot "
                f"read; nothing past it is copied (fix its producer, then skip the record: mirror_resolve_gap)")
    return (f"the record at {where} carries a {exc} (replication.on_malformed: fail); nothing past it is copied "
            f"(fix its producer, then set on_malformed: fresh, or skip the record)")


def odd_time(result: PartitionResult, ts_type: int, ts: int, offset: int) -> int:
    """The timestamp to produce a copy with when the source's is not positive.

    None (``-1``, or a record of the old format without one) stays none. A CreateTime
    of exactly 0 cannot be written by librdkafka, which reads 0 as "now" (rdkafka_msg.c,
    ``rd_kafka_msg_new0``): the copy gets 1 ms, the same audit window and the same
    retention, and is counted in the result (``retimed``) and logged.
    """
    if ts < 0 or ts_type == TIMESTAMP_NOT_AVAILABLE:
        return -1
    if result.retimed == 0:
        log.warning("%s %s[%d]@%d: the record's CreateTime is 0, which the Kafka client cannot write (it reads 0 as "
                    "'now'); its copy is written at 1 ms, as are any others of this run (counted as 'retimed')",
                    result.link_id, result.topic, result.partition, offset)
    result.retimed += 1
    return 1


def too_large(task: PartitionTask, offset: int, error: Any, size: int | None = None) -> str | None:
    """The sentence for a copy too large for its target topic, or ``None`` when ``error`` is another one."""
    err = error.args[0] if isinstance(error, KafkaException) else error
    if not isinstance(err, KafkaError) or err.code() not in _BATCH_TOO_LARGE:
        return None
    target = f"{task.target}'s {task.target_topic}"
    allows = f"allows {task.max_message_bytes:,} bytes" if task.max_message_bytes else "has a smaller limit"
    source = (f"; the source topic on {task.source} allows {task.source_max_message_bytes:,}"
              if task.source_max_message_bytes else "")
    record = f" ({size:,} bytes of key and value, plus headers)" if size is not None else ""
    return (f"the copy of the record at {task.source} {task.source_topic}[{task.partition}] offset {offset}{record} "
            f"is too large for {target}, which {allows} (max.message.bytes){source}. Raise max.message.bytes of "
            f"{task.target_topic} on {task.target} to at least the source's plus room for the copy's headers, or on "
            f"the topic's config owner, whose value the next run carries there (docs/topics.md, 'Record size'); "
            f"nothing past the record is copied ({err.name()})")


def target_gone(task: PartitionTask, offset: int, cause: str) -> str:
    """Why a copy stopped when its target topic no longer exists (deleted under it)."""
    return (f"the target topic {task.target_topic} is gone from {task.target} (deleted during the copy?): the copy of "
            f"source offset {offset} was not written ({cause}); nothing past it is copied. The next run creates "
            f"the topic again in the source's shape and fills it from the source's first offset (the copier itself "
            f"never creates topics)")


def topic_missing(consumer: Consumer, topic: str, timeout: float = 5.0) -> bool:
    """Whether the cluster ``consumer`` talks to says ``topic`` does not exist (``False`` when it cannot tell)."""
    try:
        found = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
    except KafkaException:
        return False
    return found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART)


#: The target topic (or partition) does not exist: no message of the range can be written.
_TARGET_GONE = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION})

#: Errors behind which a deleted target topic may hide: a copy to it waits, then times out.
SILENT_OR_GONE = _TARGET_GONE | {KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT}

#: Refusals of a whole record batch: one message per request goes through.
_BATCH_TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})


class _Abort(Exception):
    """A delivery failed: the open transaction must be aborted."""


class _SourceMoved(Exception):
    """The source answered the read at the copy's position with "out of range" (see :meth:`_RangeCopy.moved`)."""


@dataclass
class _Batch:
    """What the open transaction's delivery callbacks found: the lowest refused span, or nothing.

    ``first_error`` is ``(span, error)``; ``span`` is ``[first, end]`` of the consumed chunk
    the refused copy came from (``end`` is -1 while that chunk is still being produced).
    """

    first_error: tuple[list[int], KafkaError] | None = None


class _RangeCopy:
    """Copy ``[start, end)`` in transactions of ``task.txn_records`` or ``task.txn_max_seconds``, whichever comes first.

    ``one_by_one`` waits for each copy's acknowledgement before the next (one
    message per request): slow, used only to find the message a target refuses.
    ``kept_reader``: the reader copied another range before, so anything it still
    hands over for another partition (even an end-of-partition event) is ignored.
    Counts since the last commit are kept here and folded into the result at each
    commit, so a result never counts a copy its checkpoint does not cover.
    """

    def __init__(self, copy: _PartitionCopy, reader: Any, one_by_one: bool, *, kept_reader: bool) -> None:
        task, result = copy.task, copy.result
        self.copy, self.task, self.result, self.reader = copy, task, result, reader
        self.producer, self.checkpoint, self.op_timeout = copy.producer, copy.checkpoint, copy.op_timeout
        self.idle_timeout, self.one_by_one, self.kept_reader = copy.idle_timeout, one_by_one, kept_reader
        self.txn = Commits(task, copy.producer, copy.checkpoint, copy.op_timeout, {task.partition: copy.held})
        self.batch = _Batch()
        self.limiter = RateLimiter(task.max_bytes_per_second) if task.max_bytes_per_second else None
        # The time bound on a transaction is checked once per fetched batch, and per record when a
        # batch can take longer than the transaction may stay open (throttled, or one copy at a time).
        self.slow = self.limiter is not None or one_by_one
        self.headers_of = skipping_held(CopyHeaders(task.source, task.topic, task.partition, level=task.level,
                                                    backfill_flags=task.backfill_flags,
                                                    on_malformed=task.on_malformed).for_copy, copy.held)
        self.crc = result.checksum
        self.last_msg: Any = None  # the last record read since the last commit
        self.position = self.end = 0
        self.in_txn = 0
        self.txn_started = self.last_progress = 0.0
        # since the last commit; folded into the result there
        self.copied = self.skipped = self.malformed = self.bytes = 0
        self.rereads = 0

    def run(self, start: int, end: int) -> int | None:
        """Returns ``None``, or after a refused copy that is not pinpointed (batched), the end of the
        source span it lies in; ``result.error_offset`` is then the span's start."""
        task, result = self.task, self.result
        self.reader.assign([TopicPartition(task.source_topic, task.partition, start)])
        self.position, self.end = start, end
        self.txn.begin()
        self.last_progress = self.txn_started = time.monotonic()
        before = target_end(self.checkpoint, task, self.op_timeout) if result.target_first_offset is None else None
        copied_before = result.copied
        try:
            with during("read"):
                self.copy_until_end()
        except _Abort:
            return self.aborted()
        except ProduceRejected as exc:
            # Commit what precedes the message the target refuses, then stop at it.
            try:
                self.commit(exc.offset)
            except _Abort:  # an earlier copy of the transaction was refused as well: abort, find that one
                return self.aborted()
            result.error = too_large(task, exc.offset, exc.__cause__, exc.size) or exc.reason
            result.error_offset = exc.offset
        except TargetSilent:
            # An abort would only time out as well. The open transaction is aborted by the
            # target's coordinator (transaction.timeout.ms) or fenced by the next attempt's
            # init_transactions with the same transactional.id; either way nothing of it shows.
            raise
        except KafkaException:
            try:
                self.txn.abort()
            except KafkaException:
                pass  # fenced or fatal: the next attempt's init_transactions cleans up
            raise
        if result.copied > copied_before:
            note_target_offsets(result, before, target_end(self.checkpoint, task, self.op_timeout))
        return None

    def copy_until_end(self) -> None:
        task, result = self.task, self.result
        while self.position < self.end:
            if task.stop_at is not None and time.time() >= task.stop_at:
                self.window_closed()
                break
            # Ask for no more than the range still needs: consume() returns as soon as it has that
            # many, instead of waiting out CONSUME_WAIT_S at the end of every range.
            msgs = self.reader.consume(num_messages=max(1, min(500, self.end - self.position)),
                                       timeout=CONSUME_WAIT_S)
            now = time.monotonic()
            if not msgs:
                if now - self.last_progress > self.idle_timeout:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                                    f"no progress reading the source for {self.idle_timeout:.0f}s "
                                                    f"at offset {self.position} (planned end {self.end})"))
                continue
            try:
                progressed = self.copy_chunk(msgs)
            except _SourceMoved:
                if not self.moved():
                    return  # stopped by name, at a committed position; no transaction is open
                self.last_progress = now
                continue
            if progressed:
                self.last_progress = now
            if self.in_txn and time.monotonic() - self.txn_started >= task.txn_max_seconds:
                self.commit(self.position)
                self.txn.begin()
        if self.in_txn or self.position != result.next_offset:
            self.commit(self.position)
        else:  # the range ended on a transaction boundary: the open transaction is empty
            self.txn.close_empty()
        result.throttled_s = round(result.throttled_s, 3)

    def copy_chunk(self, msgs: list[Any]) -> bool:
        """Decide and produce one consumed chunk; whether it held any message of the range.

        The loop keeps its state in locals (it runs per message) and hands it back
        to the instance before every commit and when it leaves.
        """
        task, result, producer, limiter = self.task, self.result, self.producer, self.limiter
        read, topic = task.source_topic, task.target_topic  # the names on the source and on the target
        partition, txn_records, max_bytes = task.partition, task.txn_records, task.max_bytes
        headers_of, kept_reader, one_by_one, slow = self.headers_of, self.kept_reader, self.one_by_one, self.slow
        position, end, crc, in_txn = self.position, self.end, self.crc, self.in_txn
        last_msg = self.last_msg
        progressed = False
        span = [position, -1]  # the source offsets this chunk's copies come from, for a refusal
        state = self

        # One callback per chunk, not per copy: the producer reports failures only. A Python function,
        # not a C-level callable such as functools.partial: confluent-kafka may call it while a fatal
        # error (fenced) is pending; a C-level callable turns that into a SystemError that hides the
        # fencing, a Python one lets flush() raise the KafkaException itself.
        def refused(err: KafkaError | None, msg: Any, span: list[int] = span) -> None:
            batch = state.batch
            if err is not None and (batch.first_error is None or span[0] < batch.first_error[0][0]):
                batch.first_error = (span, err)

        copied = skipped = malformed = size_total = 0
        try:
            for msg in msgs:
                if kept_reader:
                    msg_topic = msg.topic()
                    if msg_topic is not None and (msg.partition() != partition or msg_topic != read):
                        continue  # the kept reader's previous range: never this range's data or end
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= end:  # only markers or aborted records remain before end
                            position = end
                        continue
                    if err.code() in SOURCE_MOVED_CODES:
                        raise _SourceMoved()
                    raise KafkaException(err)
                offset = msg.offset()
                if offset < position:
                    continue  # re-delivered after a seek: already handled, never copy twice
                if offset >= end:
                    position = end
                    break
                progressed = True
                try:
                    out_headers, problem = headers_of(read_headers(msg), offset)
                except (MalformedCopyFlags, UnreadableRecord) as exc:  # stop exactly here, by name
                    raise ProduceRejected(offset, unreadable(task, offset, exc)) from exc
                if problem is not None:
                    malformed += 1
                    log.warning("%s %s[%d]@%d: %s", task.link_id, topic, partition, offset, problem)
                if out_headers is not None:
                    key, value = msg.key(), msg.value()
                    ts_type, ts = msg.timestamp()
                    timestamp = ts if ts > 0 else odd_time(result, ts_type, ts, offset)
                    try:
                        producer.produce(topic, value, key, partition=partition, on_delivery=refused,
                                         timestamp=timestamp, headers=out_headers)
                    except (BufferError, KafkaException):  # local queue full, or refused: the careful path
                        produce_carefully(producer, topic, key, value,
                                          {"partition": partition, "headers": out_headers, "timestamp": timestamp},
                                          refused, offset)
                    if one_by_one:
                        flush(producer, self.op_timeout)
                        if self.batch.first_error is not None:
                            self.batch.first_error = ([offset, offset + 1], self.batch.first_error[1])  # exactly it
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
                last_msg = msg
                in_txn += 1
                if slow and task.stop_at is not None and time.time() >= task.stop_at:
                    break  # throttled, a chunk may outlast the window: copy_until_end stops at once
                if max_bytes is not None and result.bytes + self.bytes + size_total >= max_bytes:
                    end = position  # this run's byte budget is spent: commit and stop here
                    break
                if in_txn >= txn_records or (slow and time.monotonic() - self.txn_started >= task.txn_max_seconds):
                    self.position, self.crc, self.last_msg = position, crc, last_msg
                    self.add(copied, skipped, malformed, size_total)
                    copied = skipped = malformed = size_total = in_txn = 0
                    self.commit(position)
                    self.txn.begin()
        finally:
            self.position, self.end, self.crc, self.in_txn, self.last_msg = position, end, crc, in_txn, last_msg
            self.add(copied, skipped, malformed, size_total)
        span[1] = position
        return progressed

    def window_closed(self) -> None:
        """The link's window closed: what was read is committed as usual, the rest waits for the next window."""
        self.end = self.position
        self.result.window_closed = True

    def moved(self) -> bool:
        """The source's log moved under the copy (retention, ``delete_records``, truncation); whether to go on.

        What was read is committed first, so the transaction in flight stays exact;
        then the move is decided as at the copy's start
        (:func:`~mirrorflow.copy.state.checkpoints.moved_under_copy`): a gap per
        ``on_gap``, a truncation stops the partition. The reader is moved only here,
        never by librdkafka.
        """
        task, result = self.task, self.result
        if self.in_txn or self.position != result.next_offset:
            self.commit(self.position)
        else:
            self.txn.close_empty()
        tp = TopicPartition(task.source_topic, task.partition)
        with during("offsets"):
            low, high = self.reader.get_watermark_offsets(tp, timeout=self.op_timeout, cached=False)
        move = moved_under_copy(task, self.position, low, high, self.rereads)
        self.rereads += move.offset == self.position
        if not record_move(result, move):
            return False
        self.position = move.offset
        # assigned again, not seek()ed: after "out of range" the partition's fetcher stands still, and
        # librdkafka refuses a seek in that state
        self.reader.assign([TopicPartition(task.source_topic, task.partition, move.offset)])
        self.txn.begin()
        self.txn_started = time.monotonic()
        return True

    def add(self, copied: int, skipped: int, malformed: int, size: int) -> None:
        self.copied += copied
        self.skipped += skipped
        self.malformed += malformed
        self.bytes += size

    def commit(self, next_offset: int) -> None:
        """Make everything since the last commit durable with ``next_offset`` as the checkpoint, then count it."""
        with during("produce"):
            unacknowledged = flush_unless_refused(self.producer, self.op_timeout,
                                                  lambda: self.batch.first_error is not None)
        if self.batch.first_error is not None:
            raise _Abort()
        self.txn.require_acknowledged(unacknowledged)
        last, newest = self.copy.last, None
        if self.last_msg is not None and self.last_msg.offset() < next_offset:
            last, newest = last_read(self.last_msg), self.last_msg.timestamp()[1]
        with during("commit"):
            self.txn.commit(next_offset, last)
        self.copy.last, self.last_msg = last, None
        result = self.result
        note(next_offset - result.next_offset, self.bytes)  # progress, once per commit (mirrorflow.progress)
        result.transactions += 1
        result.next_offset = next_offset
        if newest is not None and newest >= 0:
            result.newest_ms = max(result.newest_ms or -1, newest)
        result.checksum = self.crc
        result.copied += self.copied
        result.skipped += self.skipped
        result.malformed += self.malformed
        result.bytes += self.bytes
        self.copied = self.skipped = self.malformed = self.bytes = 0
        self.batch = _Batch()
        self.in_txn = 0
        self.txn_started = time.monotonic()

    def aborted(self) -> int | None:
        """After a refused copy: abort the open transaction and say where the refusal lies."""
        result = self.result
        assert self.batch.first_error is not None
        (first, span_end), err = self.batch.first_error
        if err.code() == KafkaError._PURGE_QUEUE:  # the transaction failed, and took its copies along: why?
            err = self.txn.failure() or err
        refused = named(self.task, "produce", err, self.copy.source, self.copy.target)
        try:
            self.txn.abort()
        except KafkaException:
            if refused is None:
                raise
            # The coordinator never saw the refused partitions; the abort may be refused too (the
            # producer is then unusable, and a result with an error keeps no producer).
        span_end = self.position if span_end < 0 else span_end  # refused before its chunk was all produced
        result.error_offset = first
        result.error_code = err.code()
        if refused is not None:  # a missing permission, not one message: no use looking for the message
            result.error = str(refused)
            return None
        if err.code() in _TARGET_GONE:  # nor when the target topic is gone
            result.error = target_gone(self.task, first, err.name())
            return None
        if span_end - first <= 1:
            result.error = (too_large(self.task, first, err)
                            or f"{err.name()}: {err.str()} (producing the copy of source offset {first})")
            return None
        result.error = (f"{err.name()}: {err.str()} (producing a copy of one of source offsets "
                        f"{first}..{span_end - 1})")
        return span_end
