"""Copy the ranges of one transaction group together: one reader, one producer, one transaction at a time.

Partitions of a topic share a ``transactional.id`` by group (:mod:`mirrorflow.copy.txn_groups`),
so their copies can share transactions: the group's producer fences once, the
checkpoints of all its partitions are read after that, and each commit sends the
next source offset of every partition it moved with ``send_offsets_to_transaction``
(at least once: one checkpoint commit for all of them). Copies and checkpoints of a
group still become visible together or not at all, and a retried or zombie copy of
any of its partitions is fenced by the same id.

Why: a commit first waits for the producer's acknowledgements, and while an
idempotent librdkafka producer waits after a burst, its broker thread spins.
Copied one partition at a time, a run paid that wait (and, exactly once, a fresh
producer's ``init_transactions``) once per partition, on machines where the
brokers need the CPU (docs/benchmarks.md has the figures).

A partition the target's metadata shows without a leader stays out of the group's
transactions (:func:`leaderless`): it would hold every commit of the group, and
even the abort of a failed one. It fails alone, named; the others copy on.

What this loop does not do, :func:`~mirrorflow.copy.engine.partition.copy_partition` does,
one partition after the other under the same ``transactional.id``:

- ranges restored from the S3 archive (onboarding, :func:`groupable`): the whole
  group goes that way;
- a copy the target refuses: the open transaction is aborted, and each partition
  not yet at its end continues from its checkpoint, where the per-partition path
  finds the refused message at its exact offset, commits what precedes it and
  stops that partition only.
"""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import replace
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from mirrorflow.copy.engine.access import during, named, stage_of, unexplained
from mirrorflow.copy.engine.clients import CopyClients
from mirrorflow.copy.engine.partition import (
    SILENT_OR_GONE,
    copy_partition,
    odd_time,
    target_gone,
    topic_missing,
    unreadable,
)
from mirrorflow.copy.engine.spans import note_target_offsets, target_ends
from mirrorflow.copy.engine.throttle import RateLimiter
from mirrorflow.copy.engine.transactions import (
    Commits,
    ProduceRejected,
    TargetSilent,
    flush_unless_refused,
    produce_carefully,
)
from mirrorflow.copy.headers import CopyHeaders
from mirrorflow.copy.state import (
    Held,
    HeldUnknown,
    LastRead,
    LinkSwitchedAway,
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
from mirrorflow.copy.txn_groups import txn_group
from mirrorflow.errors import MalformedCopyFlags, UnreadableRecord
from mirrorflow.kafka import CONSUME_WAIT_S, FENCED_CODES, SOURCE_MOVED_CODES, ClusterClient, read_headers
from mirrorflow.progress import note

log = logging.getLogger(__name__)


def groupable(task: PartitionTask) -> bool:
    """Whether ``task``'s range can share transactions with the rest of its group (see the module doc)."""
    return task.restore is None


class _Refused(Exception):
    """The target refused a copy of the open transaction: abort, then go partition by partition."""


class _Failure:
    """The first failed delivery of the open transaction, set by the delivery callback."""

    error: KafkaError | None = None


def copy_group(tasks: list[PartitionTask], source: ClusterClient, target: ClusterClient, *, clients: CopyClients,
               idle_timeout: float = 30.0, op_timeout: float = 30.0) -> list[PartitionResult]:
    """Copy ``tasks`` (one link, one topic, one transaction group) to their ends; never raises for data errors.

    One result per task, in the order of ``tasks``; an error fails the group's
    partitions that had not reached their end, at their checkpoints.
    """
    first = tasks[0]
    if len({(t.link_id, t.source, t.target, *txn_group(t.topic, t.partition)) for t in tasks}) != 1:
        raise ValueError(f"{first.link_id}: copy_group needs the ranges of one transaction group, got "
                         f"{sorted({(t.topic, t.partition) for t in tasks})}")
    results = {t.partition: PartitionResult(t.link_id, t.source, t.target, t.topic, t.partition,
                                            end_offset=t.end_offset) for t in tasks}
    started = time.monotonic()
    producer = clients.producer(first, target)
    checkpoint = clients.checkpoint(first, target)
    reader, _ = clients.reader(first, source)  # a kept reader's leftovers are skipped by topic-partition
    sick = leaderless(checkpoint, first.target_topic, [t.partition for t in tasks], op_timeout)
    if sick:
        # A partition without a leader would join the group's transaction and hold all of it: its commit
        # waits for every partition, and so does its abort (the coordinator's markers). It stays out.
        clients.release(first, source, target, reader=reader, checkpoint=checkpoint, producer=producer,
                        clean=True, abandoned=False)
        for p in sick:
            result = results[p]
            result.error = (f"{first.target} {first.target_topic}[{p}] has no leader (its broker is down?): not "
                            f"copied in this run, nothing written; the other partitions of its transaction group copy "
                            f"on")
            result.error_code = KafkaError.LEADER_NOT_AVAILABLE
            log.error("%s %s[%d]: %s", first.link_id, first.topic, p, result.error)
        healthy = [t for t in tasks if t.partition not in sick]
        if healthy:
            for result in copy_group(healthy, source, target, clients=clients, idle_timeout=idle_timeout,
                                     op_timeout=op_timeout):
                results[result.partition] = result
        return [results[t.partition] for t in tasks]
    clean = abandoned = refused = False
    try:
        if first.exactly_once:
            with during("start"):
                producer.init_transactions(op_timeout)
        # after fencing: nobody else moves them now
        with during("checkpoint"):
            committed = read_positions(checkpoint, first.link_id, first.target, first.target_topic,
                                       [t.partition for t in tasks], op_timeout)
        with during("offsets"):
            earliest = _earliest(reader, first.source_topic, [t.partition for t in tasks], op_timeout)
        ranges: dict[int, list[int]] = {}
        lasts: dict[int, LastRead | None] = {}
        held: dict[int, Held | None] = {}
        for task in tasks:
            result = results[task.partition]
            position, metadata = committed[task.partition]
            begin, set_aside_because = task_start(task, position, metadata, earliest[task.partition])
            lasts[task.partition] = trusted_last(begin, position, metadata, set_aside_because)
            if not record_start(result, begin, set_aside_because):
                continue
            try:
                held[task.partition] = held_at_start(task, metadata, set_aside_because)
            except HeldUnknown as exc:
                result.error, result.start_offset = str(exc), begin.offset
                result.next_offset = result.error_offset = begin.offset
                continue
            start = begin.offset
            end = task.end_offset if task.max_records is None else min(task.end_offset, start + task.max_records)
            result.start_offset = result.next_offset = start
            result.end_offset = end
            # Also with nothing to copy, a position to commit: an onboarding hand-over, past a skipped gap,
            # or an idle link's checkpoint committed again before Kafka expires it.
            if start < end or begin.initialised or begin.lost or task.keep_alive:
                ranges[task.partition] = [start, end]
                result.kept_alive = start >= end and task.keep_alive and not (begin.initialised or begin.lost)
        check = {p: last for p, last in lasts.items()
                 if last is not None and p in ranges and ranges[p][0] < ranges[p][1] and last.offset >= earliest[p]}
        for p, error in verify(reader, first.link_id, first.source, first.source_topic, check, op_timeout).items():
            results[p].error, results[p].error_offset = error, ranges.pop(p)[0]
            results[p].diverged_at = check[p].offset
            log.error("%s %s[%d]: %s", first.link_id, first.topic, p, error)
        if ranges:
            with during("read"):
                _copy_ranges(tasks, results, producer, checkpoint, reader, ranges, lasts, held, idle_timeout,
                             op_timeout)
        clean = all(r.error is None for r in results.values())  # a copy with an error keeps no client
    except _Refused:
        refused = True
    except KafkaException as exc:
        err = exc.args[0]
        abandoned = getattr(exc, "abandoned", False)
        by_partition = {t.partition: t for t in tasks}
        gone = err.code() in SILENT_OR_GONE and topic_missing(checkpoint, first.target_topic)
        for p, result in results.items():
            if result.error is None and (result.next_offset < 0 or result.next_offset < result.end_offset):
                refused_by = named(by_partition[p], stage_of(exc), err, source, target)
                result.error = str(refused_by) if refused_by is not None else \
                    unexplained(by_partition[p], stage_of(exc), err, source, target)
                if refused_by is None and gone:
                    result.error = target_gone(by_partition[p], max(result.next_offset, 0), result.error)
                result.error_code = err.code()
                result.fenced = err.code() in FENCED_CODES or err.fatal()
                result.error_offset = result.next_offset if result.next_offset >= 0 else None  # -1: not started
    except LinkSwitchedAway as exc:
        for result in results.values():
            result.error = str(exc)
            result.fenced = True
    except BaseException:
        clients.release(first, source, target, reader=reader, checkpoint=checkpoint, producer=producer,
                        clean=False, abandoned=False)
        raise
    if not refused:
        clients.release(first, source, target, reader=reader, checkpoint=checkpoint, producer=producer,
                        clean=clean and not abandoned, abandoned=abandoned)
        for result in results.values():
            result.duration_s = round(time.monotonic() - started, 3)
        return [results[t.partition] for t in tasks]

    # A refused copy: what the group committed stays; every partition not yet at its end goes on
    # by itself from its checkpoint, where the per-partition path pinpoints the refusal.
    clients.release(first, source, target, reader=reader, checkpoint=checkpoint, producer=producer,
                    clean=False, abandoned=False)
    log.info("%s %s: the target refused a copy in a transaction of partitions %s; copying them one by one",
             first.link_id, first.topic, sorted(ranges))
    out = []
    for task in tasks:
        result = results[task.partition]
        # Also an onboarding start whose commit went down with the aborted transaction.
        if result.error is None and (result.next_offset < result.end_offset
                                     or (result.initialised and result.transactions == 0)):
            result = copy_partition(replace(task, end_offset=result.end_offset, max_records=None), source, target,
                                    idle_timeout=idle_timeout, op_timeout=op_timeout, clients=clients,
                                    carry=result)
        result.duration_s = round(time.monotonic() - started, 3)
        out.append(result)
    return out


def leaderless(client: Consumer, topic: str, partitions: list[int], timeout: float) -> set[int]:
    """The ``partitions`` of ``topic`` that the target's metadata shows without a leader (none when it cannot say)."""
    try:
        found = client.list_topics(topic, timeout=timeout).topics.get(topic)
    except KafkaException:
        return set()  # the copy meets the trouble itself, by name
    if found is None or found.error is not None:
        return set()
    return {p for p in partitions if p in found.partitions and found.partitions[p].leader < 0}


def _earliest(reader: Consumer, topic: str, partitions: list[int], timeout: float) -> dict[int, int]:
    """The source's earliest offsets (low watermarks) of ``partitions``, in one request per leader.

    Asked one partition at a time, these were 16 sequential round trips per group before
    any copying began; ``offsets_for_times`` with ``OFFSET_BEGINNING`` asks them together.
    """
    out: dict[int, int] = {}
    for tp in reader.offsets_for_times([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions],
                                       timeout=timeout):
        if tp.error is not None:
            raise KafkaException(tp.error)
        out[tp.partition] = tp.offset
    return out


def _copy_ranges(tasks: list[PartitionTask], results: dict[int, PartitionResult], producer: Producer,
                 checkpoint: Consumer, reader: Consumer, ranges: dict[int, list[int]],
                 lasts: dict[int, LastRead | None], held: dict[int, Held | None], idle_timeout: float,
                 op_timeout: float) -> None:
    """Copy every ``ranges[p] = [start, end)`` of the group, in transactions bounded like a partition's.

    ``lasts``: the last record read before each checkpoint, updated at each commit. ``held``: per
    partition, what the target holds already after a recreated source (mirrorflow.copy.state.held).

    A range may be empty: an onboarding start with nothing to copy is still committed
    as the link's checkpoint. A byte-rate cap applies to the group as a whole (each task
    carries the group's share, see mirrorflow.copy.plan); a per-run byte budget to each
    partition, as on the per-partition path. Raises :class:`_Refused` after aborting,
    when the target refused a copy of the open transaction.
    """
    first = tasks[0]
    topic, read, write = first.topic, first.source_topic, first.target_topic  # logical, on source, on target
    by_partition = {t.partition: t for t in tasks}
    txn = Commits(first, producer, checkpoint, op_timeout, held)
    headers = {p: skipping_held(CopyHeaders(first.source, topic, p, level=first.level,
                                            backfill_flags=by_partition[p].backfill_flags,
                                            on_malformed=by_partition[p].on_malformed).for_copy, held.get(p))
               for p in ranges}
    before = target_ends(checkpoint, first, list(ranges), op_timeout)
    position = {p: r[0] for p, r in ranges.items()}
    end = {p: r[1] for p, r in ranges.items()}
    copying = {p for p, (start, stop) in ranges.items() if start < stop}  # partitions not yet at their end
    unmarked = {p for p in ranges if p not in copying}  # to commit, nothing to copy: hand-over, gap
    limiter = RateLimiter(first.max_bytes_per_second) if first.max_bytes_per_second else None
    max_bytes = first.max_bytes
    # since the last commit, per partition: copied, skipped, malformed, bytes; the checksums run on
    counts = {p: [0, 0, 0, 0] for p in ranges}
    crc = {p: results[p].checksum for p in ranges}
    last_msg: dict[int, Any] = {}  # the last record read per partition since the last commit
    newest: dict[int, int] = {}  # per partition, the newest timestamp of a record read before a commit
    failed = _Failure()

    # A Python function that calls nothing implemented in C: confluent-kafka may call it while a
    # fatal error (fenced) is pending, and a C call made then (list.append, functools.partial)
    # raises SystemError, which hides the fencing (see copy_partition).
    def refused(err: KafkaError | None, msg) -> None:
        if err is not None and failed.error is None:
            failed.error = err

    def done(p: int) -> None:
        copying.discard(p)
        reader.pause([TopicPartition(read, p)])  # stop fetching what lies past this run's end

    # bound below, after the reader is assigned; declared here so the checker sees them before commit's nonlocal
    in_txn: int
    txn_started: float

    def commit() -> None:
        nonlocal in_txn, txn_started
        with during("produce"):
            unacknowledged = flush_unless_refused(producer, op_timeout, lambda: failed.error is not None)
        if failed.error is not None:
            raise _Refused()
        txn.require_acknowledged(unacknowledged)
        moved = [p for p in ranges if position[p] != results[p].next_offset or p in unmarked]
        for p, msg in last_msg.items():
            lasts[p] = last_read(msg)
            newest[p] = max(newest.get(p, -1), msg.timestamp()[1])
        last_msg.clear()
        with during("commit"):
            txn.commit_positions([TopicPartition(write, p, position[p]) for p in moved], lasts)
        note(sum(position[p] - results[p].next_offset for p in moved),  # progress, once per commit
             sum(counts[p][3] for p in moved))
        for p in moved:
            result, (copied, skipped, malformed, size) = results[p], counts[p]
            result.copied += copied
            result.skipped += skipped
            result.malformed += malformed
            result.bytes += size
            result.checksum = crc[p]
            result.next_offset = position[p]
            result.transactions += 1
            if newest.get(p, -1) >= 0:
                result.newest_ms = newest[p]
            counts[p] = [0, 0, 0, 0]
        unmarked.clear()
        in_txn = 0
        txn_started = time.monotonic()

    rereads: dict[int, int] = {}

    def source_moved(p: int) -> None:
        """The source's log moved under ``p``'s read (see copy_partition's ``moved``): commit what the group
        read, then decide for ``p`` as at its start; the other partitions go on."""
        nonlocal in_txn, txn_started
        if in_txn or unmarked or any(position[q] != results[q].next_offset for q in ranges):
            commit()
        else:
            txn.close_empty()
        with during("offsets"):
            low, high = reader.get_watermark_offsets(TopicPartition(read, p), timeout=op_timeout, cached=False)
        move = moved_under_copy(by_partition[p], position[p], low, high, rereads.get(p, 0))
        rereads[p] = rereads.get(p, 0) + (move.offset == position[p])
        if record_move(results[p], move):
            position[p] = move.offset
            if position[p] >= end[p]:
                done(p)  # what is left of its range is gone: the next commit moves its checkpoint past it
            else:  # assigned again: librdkafka refuses a seek once its fetcher stopped at "out of range"
                reader.incremental_unassign([TopicPartition(read, p)])
                reader.incremental_assign([TopicPartition(read, p, position[p])])
        else:
            done(p)
        txn.begin()
        txn_started = time.monotonic()

    reader.assign([TopicPartition(read, p, ranges[p][0]) for p in copying])
    in_txn = 0
    txn.begin()
    last_progress = txn_started = time.monotonic()
    stop_at = first.stop_at  # the link's window closes then: commit what was read, take no more

    def window_closed() -> None:
        for p in list(copying):
            end[p] = position[p]
            results[p].window_closed = True
            done(p)

    try:
        while copying:
            if stop_at is not None and time.time() >= stop_at:
                window_closed()
                break
            wanted = sum(end[p] - position[p] for p in copying)
            msgs = reader.consume(num_messages=max(1, min(500, wanted)), timeout=CONSUME_WAIT_S)
            now = time.monotonic()
            if not msgs:
                if now - last_progress > idle_timeout:
                    raise KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                                    f"no progress reading the source for {idle_timeout:.0f}s at "
                                                    f"offsets {({p: position[p] for p in sorted(copying)})}"))
                continue
            for msg in msgs:
                p = msg.partition()
                msg_topic = msg.topic()
                if msg_topic is not None and (p not in copying or msg_topic != read):
                    continue  # past this partition's end, or a kept reader's previous range
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= end[p]:  # only markers or aborted records remain before the end
                            position[p] = end[p]
                            done(p)
                        continue
                    if err.code() in SOURCE_MOVED_CODES:
                        source_moved(p)
                        last_progress = time.monotonic()
                        continue
                    raise KafkaException(err)
                offset = msg.offset()
                if offset < position[p]:
                    continue  # re-delivered after a seek: already handled, never copy twice
                if offset >= end[p]:
                    position[p] = end[p]
                    done(p)
                    continue
                last_progress = now
                try:
                    out_headers, problem = headers[p](read_headers(msg), offset)
                except (MalformedCopyFlags, UnreadableRecord) as exc:  # the partition path stops exactly there
                    raise ProduceRejected(offset, unreadable(by_partition[p], offset, exc)) from exc
                count = counts[p]
                if problem is not None:
                    count[2] += 1
                    log.warning("%s %s[%d]@%d: %s", first.link_id, topic, p, offset, problem)
                if out_headers is not None:
                    key, value = msg.key(), msg.value()
                    ts_type, ts = msg.timestamp()
                    timestamp = ts if ts > 0 else odd_time(results[p], ts_type, ts, offset)
                    try:
                        producer.produce(write, value, key, partition=p, on_delivery=refused, timestamp=timestamp,
                                         headers=out_headers)
                    except (BufferError, KafkaException):  # local queue full, or refused: the careful path
                        produce_carefully(producer, write, key, value, {"partition": p, "headers": out_headers,
                                                               "timestamp": timestamp}, refused, offset)
                    size = len(key or b"") + len(value or b"")
                    count[0] += 1
                    count[3] += size
                    crc[p] = zlib.crc32(value or b"", zlib.crc32(key or b"", crc[p]))
                    if limiter is not None:
                        results[p].throttled_s += limiter.acquire(size)
                else:
                    count[1] += 1
                position[p] = offset + 1
                last_msg[p] = msg
                in_txn += 1
                if limiter is not None and stop_at is not None and time.time() >= stop_at:
                    window_closed()  # throttled, a chunk may outlast the window: checked per record
                    break
                if position[p] >= end[p] or (max_bytes is not None and results[p].bytes + count[3] >= max_bytes):
                    end[p] = position[p]  # at its end, or this run's byte budget for it is spent
                    done(p)
                if in_txn >= first.txn_records or (
                        limiter is not None and time.monotonic() - txn_started >= first.txn_max_seconds):
                    commit()
                    txn.begin()
            if in_txn and time.monotonic() - txn_started >= first.txn_max_seconds:
                commit()
                txn.begin()
        if in_txn or unmarked or any(position[p] != results[p].next_offset for p in ranges):
            commit()
        else:  # the group ended on a transaction boundary: the open transaction is empty
            txn.close_empty()
    except (_Refused, ProduceRejected) as exc:
        cause = exc.__cause__
        if isinstance(cause, KafkaException) and (cause.args[0].fatal() or cause.args[0].code() in FENCED_CODES):
            raise cause from None  # fenced or fatal, not a refusal: the group fails as such
        txn.abort()  # raises itself when the producer was fenced meanwhile
        raise _Refused() from None
    except TargetSilent:
        raise  # an abort would only time out as well (see copy_partition)
    except KafkaException:
        try:
            txn.abort()
        except KafkaException:
            pass  # fenced or fatal: the next attempt's init_transactions cleans up
        raise
    reader.resume([TopicPartition(read, p) for p in ranges])  # a kept reader keeps no pause
    for p in ranges:
        results[p].throttled_s = round(results[p].throttled_s, 3)
    moved = [p for p in ranges if results[p].copied]
    if moved:
        after = target_ends(checkpoint, first, moved, op_timeout)
        for p in moved:
            note_target_offsets(results[p], before[p], after[p])
