"""Bounded reads: a partition (or several) from a start offset up to an end, then stop.

Much of mirrorflow reads partitions from one offset up to an end fixed before
the read began (a last stable offset when a run was planned, a checkpoint): the
completeness audit, the onboarding check, the consumer-position scans, the age
of the oldest pending message, the archive, the copy engine's provenance scans
and history checks, the compacted stores. They all read through
:class:`RangeReader`, so that what such a read does is decided once, here:

- **Where a range ends**: at its first record at or past ``end``, or where the
  partition reports its end (``_PARTITION_EOF``) at or past ``end`` (only
  transaction markers or aborted records were left). A partition that ends
  *below* ``end`` is waited on: the end was stable when the read was planned,
  so the log gets there again unless it was truncated, and then the read fails
  by name after ``timeout``. A caller that probes for one record and takes "the
  log ends before it" as an answer says so (``until_log_end``).
- **The records at the position are gone**: retention or ``delete_records``
  moved the log start past it, or the log was truncated below it. Kafka answers
  the fetch with OFFSET_OUT_OF_RANGE, and a consumer's ``auto.offset.reset``
  would jump to the earliest (or latest) offset in silence: records skipped
  without a word. The reader's consumer has ``auto.offset.reset=error``
  (:func:`consumer_config`) and the reader raises
  :class:`~mirrorflow.errors.OffsetGone`, naming cluster, topic, partition and
  offset. It never jumps.
- **Waiting**: ``timeout`` seconds with neither a record nor a partition's end
  fail the read (:class:`~mirrorflow.errors.ReadStalled`, naming where it
  stood). A batch ``consume()`` holds a partial batch until its wait is over,
  and the last batch of every range is partial; so the reader takes what the
  consumer has queued without waiting, and only when nothing is queued waits,
  ``wait`` seconds at most, for the first record or event (which ends the wait).
- **Isolation**: ``read_committed`` unless asked otherwise: aborted records
  never count, and an end read before is a last stable offset.
- **Errors**: a partition's error is a :class:`~mirrorflow.errors.KafkaOperationError`
  (a :class:`~mirrorflow.kafka.refusals.NotAuthorized` naming the missing ACL);
  raised, or handed to ``on_error`` while the other partitions go on. An error
  about no partition of the read (a dropped broker connection, which librdkafka
  retries by itself) is logged, and the timeout decides.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from mirrorflow.errors import KafkaOperationError, OffsetGone, ReadStalled
from mirrorflow.kafka.codes import SOURCE_MOVED_CODES
from mirrorflow.kafka.config import CONSUME_WAIT_S, ClusterClient
from mirrorflow.kafka.refusals import Need, refusal

log = logging.getLogger(__name__)

#: ``(topic, partition)``
Key = tuple[str, int]
#: ``(topic, partition) -> (start, end)``: offsets ``start`` up to, not including, ``end``.
Ranges = Mapping[Key, tuple[int, int]]
#: Receives a partition's error instead of the read raising it; the partition is not read further.
OnError = Callable[[Key, KafkaOperationError], None]

#: Seconds a read may go without a record or a partition's end.
DEFAULT_TIMEOUT_S = 30.0
#: Records asked of one ``consume()`` at the most.
DEFAULT_BATCH = 1000
#: How long a reader's fetch may wait at the broker for data, unless the cluster's settings say. A range
#: ends at or below its partition's stable end, so waiting there buys nothing; and with librdkafka's
#: 500 ms the broker holds the last, idle fetch, which the reader's next range (a connection answers one
#: request at a time) or its close then waits for: half a second a range, measured.
READER_FETCH_WAIT_MS = 20


def consumer_config(client: ClusterClient, group: str, *, isolation: str = "read_committed",
                    **overrides: Any) -> dict[str, Any]:
    """A reader consumer's settings: ``overrides`` (fetch sizes and the like), then what the reader relies on.

    ``group`` is only librdkafka's required ``group.id``: a reader assigns, it never joins or commits.
    """
    wait = {} if "fetch.wait.max.ms" in client.settings else {"fetch.wait.max.ms": READER_FETCH_WAIT_MS}
    return client.consumer(group, **{**wait, **overrides, "isolation.level": isolation, "enable.partition.eof": True,
                                     "auto.offset.reset": "error"})


class RangeReader:
    """One consumer reading ranges of partitions, one read after another (see the module).

    :meth:`open` makes one with a consumer of its own, closed with the reader.
    The constructor takes a consumer its maker keeps: one made with
    :func:`consumer_config` reads exactly as an opened one; one made otherwise
    (the copy engine's kept reader) has its own ``auto.offset.reset`` decide
    what happens when the position is gone.
    """

    def __init__(self, consumer: Any, cluster: str, group: str, *, settings: Mapping[str, Any] | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, batch: int = DEFAULT_BATCH, wait: float = CONSUME_WAIT_S,
                 doing: str = "read", owned: bool = False) -> None:
        self.consumer = consumer
        self.cluster, self.group, self.settings = cluster, group, dict(settings or {})
        self.timeout, self.batch, self.wait, self.doing = timeout, batch, wait, doing
        self._owned = owned
        self._ends: dict[Key, int] = {}  # the partitions not at their end yet
        self._positions: dict[Key, int] = {}
        self._log_ends: dict[Key, int] = {}
        self._paused: list[Key] = []
        self._noise: str | None = None  # the last error about no partition of the read

    @classmethod
    def open(cls, client: ClusterClient, group: str, *, isolation: str = "read_committed",
             config: Mapping[str, Any] | None = None, timeout: float = DEFAULT_TIMEOUT_S,
             batch: int = DEFAULT_BATCH, wait: float = CONSUME_WAIT_S, doing: str = "read") -> RangeReader:
        """A reader with a consumer of its own on ``client``'s cluster (``config``: more consumer settings)."""
        consumer = Consumer(consumer_config(client, group, isolation=isolation, **dict(config or {})))
        return cls(consumer, client.name, group, settings=client.settings, timeout=timeout, batch=batch, wait=wait,
                   doing=doing, owned=True)

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the consumer if it is the reader's own."""
        if self._owned:
            self._owned = False
            self.consumer.close()

    # ----------------------------------------------------------------------------- reading

    def range(self, topic: str, partition: int, start: int, end: int, *, timeout: float | None = None,
              until_log_end: bool = False) -> Iterator[Any]:
        """The records of ``topic[partition]`` in ``[start, end)``, in offset order (see :meth:`batches`)."""
        return self.read({(topic, partition): (start, end)}, timeout=timeout, until_log_end=until_log_end)

    def read(self, ranges: Ranges, *, timeout: float | None = None, until_log_end: bool = False,
             on_error: OnError | None = None) -> Iterator[Any]:
        """The records of ``ranges`` one by one (see :meth:`batches`)."""
        for batch in self.batches(ranges, timeout=timeout, until_log_end=until_log_end, on_error=on_error):
            yield from batch

    def batches(self, ranges: Ranges, *, timeout: float | None = None, until_log_end: bool = False,
                on_error: OnError | None = None) -> Iterator[list[Any]]:
        """The records of ``ranges`` as they come, a list per ``consume()`` that brought any.

        Each partition's records come in offset order: every record in
        ``[start, end)`` the partition holds (``read_committed``: no aborted
        one), nothing before or after. It ends when every partition is at its
        end (see the module); :meth:`position` then says where each got to.
        ``timeout`` (default: the reader's) bounds the time without progress;
        ``until_log_end``: a partition whose log ends below its ``end`` is at
        its end there (:meth:`log_end` says where). A caller may stop reading
        at any time, and :meth:`stop` single partitions.
        """
        self._begin(ranges)
        limit = self.timeout if timeout is None else timeout
        progressed = time.monotonic()
        while self._ends:
            out: list[Any] = []
            moved = False
            msgs = self.consumer.consume(self._asked(), timeout=0) or self.consumer.consume(1, timeout=self.wait)
            for msg in msgs:
                key = (msg.topic(), msg.partition())
                end = self._ends.get(key)
                err = msg.error()
                if end is None:
                    if err is not None and key not in self._positions:
                        self._noise = f"{err.name()}: {err.str()}"
                        log.debug("%s: %s while reading (no partition of the read): %s", self.cluster, self.doing,
                                  self._noise)
                    continue  # a kept consumer's earlier range, a partition already at its end
                if err is not None:
                    moved = True
                    self._event(key, end, err, msg.offset(), until_log_end, on_error)
                    continue
                offset = msg.offset()
                if offset < self._positions[key]:
                    continue  # delivered again after a reconnect, or left from before the assignment
                moved = True
                if offset >= end:
                    self._done(key)
                    continue
                self._positions[key] = offset + 1
                out.append(msg)
                if offset + 1 >= end:
                    self._done(key)
            if out:
                yield out
            if out or moved:
                progressed = time.monotonic()  # after the yield: the caller's time with a batch is not the read's
            elif time.monotonic() - progressed > limit:
                self._stalled(limit, on_error)

    def stop(self, topic: str, partition: int) -> None:
        """Read no further of ``topic[partition]`` in this read (it is paused until the reader's next read)."""
        if self._ends.pop((topic, partition), None) is not None:
            self.consumer.pause([TopicPartition(topic, partition)])
            self._paused.append((topic, partition))

    def position(self, topic: str, partition: int) -> int:
        """Where the current (or last) read of ``topic[partition]`` got to: one past the last record read,
        its ``end`` once at its end (transaction markers included), its ``start`` before any record."""
        return self._positions[(topic, partition)]

    def positions(self) -> dict[Key, int]:
        """:meth:`position` of every partition of the read."""
        return dict(self._positions)

    def log_end(self, topic: str, partition: int) -> int | None:
        """Where ``topic[partition]`` reported its end below the range's ``end`` in this read; ``None``: it did not."""
        return self._log_ends.get((topic, partition))

    @property
    def pending(self) -> set[Key]:
        """The partitions of the read not at their end yet."""
        return set(self._ends)

    # ----------------------------------------------------------------------------- inside

    def _begin(self, ranges: Ranges) -> None:
        if self._paused:
            try:
                self.consumer.resume([TopicPartition(t, p) for t, p in self._paused])
            except KafkaException:
                pass  # no longer assigned: nothing to resume
            self._paused = []
        self._ends = {key: end for key, (start, end) in ranges.items() if start < end}
        self._positions = {key: start for key, (start, _) in ranges.items()}
        self._log_ends, self._noise = {}, None
        if self._ends:
            self.consumer.assign([TopicPartition(t, p, ranges[(t, p)][0]) for t, p in sorted(self._ends)])

    def _asked(self) -> int:
        left = sum(end - self._positions[key] for key, end in self._ends.items())
        return max(1, min(self.batch, left))

    def _done(self, key: Key) -> None:
        self._positions[key] = self._ends.pop(key)

    def _event(self, key: Key, end: int, err: Any, offset: int, until_log_end: bool, on_error: OnError | None) -> None:
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            if offset >= end:
                self._done(key)  # only transaction markers or aborted records were left before the end
            else:
                self._log_ends[key] = offset
                if until_log_end:
                    self._positions[key] = max(self._positions[key], offset)
                    del self._ends[key]
            return
        topic, partition = key
        doing = f"{self.doing} {topic}[{partition}]"
        failure: KafkaOperationError
        if code in SOURCE_MOVED_CODES:  # OFFSET_OUT_OF_RANGE or a truncation, and auto.offset.reset=error
            failure = OffsetGone(self.cluster, doing, err, topic, partition,
                                 offset if offset >= 0 else self._positions[key])
        else:
            failure = (refusal(self.cluster, self.settings, err, doing, Need("TOPIC", topic, "READ"),
                               Need("GROUP", self.group, "DESCRIBE"))
                       or KafkaOperationError(self.cluster, doing, err))
        self._fail(key, failure, on_error)

    def _stalled(self, limit: float, on_error: OnError | None) -> None:
        stuck = sorted(self._ends)
        for key in stuck:
            topic, partition = key
            position, end = self._positions[key], self._ends[key]
            detail = (f"neither a record nor the partition's end for {limit:g}s at offset {position} "
                      f"(reading up to {end})")
            if key in self._log_ends:
                detail += f"; the partition ended at {self._log_ends[key]}, below that: truncated or recreated?"
            if on_error is None and len(stuck) > 1:
                detail += f"; {len(stuck) - 1} more partitions of the read stand still too"
            if self._noise:
                detail += f"; last error: {self._noise}"
            stalled = ReadStalled(self.cluster, f"{self.doing} {topic}[{partition}]",
                                  KafkaError(KafkaError._TIMED_OUT, detail), topic, partition, position)
            self._fail(key, stalled, on_error)

    def _fail(self, key: Key, failure: KafkaOperationError, on_error: OnError | None) -> None:
        if on_error is None:
            raise failure
        del self._ends[key]
        on_error(key, failure)
