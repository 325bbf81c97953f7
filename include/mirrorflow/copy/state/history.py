"""Whether the source still holds the history a link copied: truncated and rewritten partitions.

Kafka can take back offsets it acknowledged: an unclean leader election, or a
broker restored from an older disk, truncates a partition, and new messages are
then written at the same offsets. A checkpoint is only an offset, so a link
would go on from it as if nothing happened: the new messages below the old
checkpoint are never copied, the ones above it are copied after copies of
messages that no longer exist.

So every checkpoint also names the last record the link read before it: its
offset and a fingerprint of its key and value (:class:`LastRead`).
Before a copy goes on from a checkpoint it reads that record again
(:func:`verify`): a different record there, or a log that ends before it, stops
the partition, naming the offset. Why a fingerprint and not Kafka's leader
epochs: an epoch says a leader changed, not whether the records did, and
librdkafka does not expose the epoch validation to a caller that assigns
offsets itself; the fingerprint needs nothing but the record.

A record the log compacted away cannot be read again: the copy then goes on,
as there is nothing to compare (docs/exactly-once.md says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException

from mirrorflow.copy.state.copies import content, copy_contents
from mirrorflow.errors import KafkaOperationError
from mirrorflow.internal_names import HISTORY_GROUP
from mirrorflow.internal_names import link_reader_group as reader_group
from mirrorflow.kafka import ClusterClient, RangeReader


@dataclass(frozen=True)
class LastRead:
    """The last record a link read before its checkpoint: offset and fingerprint (crc32, 8 hex digits)."""

    offset: int
    fingerprint: str

    def encode(self) -> str:
        return f"{self.offset}:{self.fingerprint}"

    @classmethod
    def decode(cls, text: str | None) -> LastRead | None:
        """``None`` for anything that is not ``<offset>:<fingerprint>``."""
        if not text:
            return None
        offset, _, fingerprint = text.partition(":")
        if not offset.isdigit() or len(fingerprint) != 8:
            return None
        return cls(int(offset), fingerprint)


def fingerprint(key: bytes | None, value: bytes | None) -> str:
    """The fingerprint of one record: crc32 over key and value, the part of a record its copies keep exactly.

    Not headers (copies add their own) and not the timestamp (a target may stamp its
    own): a record written again with the same key and value is the same message.
    """
    return f"{content(key, value):08x}"


def last_read(msg: Any) -> LastRead:
    """The :class:`LastRead` of a consumed message."""
    return LastRead(msg.offset(), fingerprint(msg.key(), msg.value()))


def diverged(link_id: str, source: str, topic: str, partition: int, last: LastRead, found: str) -> str:
    """The error of a partition whose history changed under the link (``found``: what is at the offset now)."""
    return (f"truncated source: {source} {topic}[{partition}] offset {last.offset}, the last record link {link_id} "
            f"read before its checkpoint, {found}: the partition was truncated (an unclean leader election, a "
            f"restore) and written again at or below offset {last.offset}; nothing copied past it, so that no "
            f"message is skipped or mixed in silently. Run mirror_resolve_gap with action rewind (dry run first): "
            f"it names the first offset that differs and resumes the link there")


def shorter(link_id: str, source: str, topic: str, partition: int, checkpoint: int, end: int) -> str:
    """The error of a partition whose log now ends below the link's checkpoint."""
    return (f"truncated source: {source} {topic}[{partition}] ends at offset {end}, below link {link_id}'s "
            f"checkpoint {checkpoint}: offsets {end}..{checkpoint - 1}, which the link copied, are no longer on "
            f"{source} (an unclean leader election, a restore), and what is written there next is not what was "
            f"copied; nothing copied. Run mirror_resolve_gap with action rewind (dry run first): it names the first "
            f"offset that differs and resumes the link there")


def verify(reader: Consumer, link_id: str, source: str, topic: str, expected: dict[int, LastRead],
           timeout: float) -> dict[int, str]:
    """Read each partition's :class:`LastRead` record again; the partitions whose record differs, with the error.

    ``reader`` is the copy's ``read_committed`` consumer with ``enable.partition.eof``;
    it is left assigned to these offsets (the copy assigns its own next). A record
    that is gone because the log was compacted counts as the same; one the log
    no longer reaches (it ends at or before the offset) as different. Read as a
    bounded read of one offset per partition (:mod:`mirrorflow.kafka.ranges`) over
    the copy's own consumer, whose ``auto.offset.reset`` stays the copy's; its
    errors are Kafka's, as the copy loops expect.
    """
    if not expected:
        return {}
    probe = RangeReader(reader, source, reader_group(link_id), timeout=timeout, doing="read again")
    errors = {}
    try:
        for msg in probe.read({(topic, p): (last.offset, last.offset + 1) for p, last in expected.items()},
                              until_log_end=True):
            last, now = expected[msg.partition()], last_read(msg)
            if now.fingerprint != last.fingerprint:
                errors[msg.partition()] = diverged(link_id, source, topic, msg.partition(), last,
                                                   f"is another record now (fingerprint {now.fingerprint}, copied "
                                                   f"{last.fingerprint})")
    except KafkaOperationError as exc:
        raise KafkaException(exc.error) from exc
    for p, last in expected.items():
        ended = probe.log_end(topic, p)
        if ended is not None:  # nothing at or past the offset any more
            errors[p] = diverged(link_id, source, topic, p, last, f"is no longer there (the log ends at {ended})")
        # no record at the offset and none reported: a higher offset came, the record was compacted away
    return errors


@dataclass(frozen=True)
class Difference:
    """Where a truncated source's history first differs from what a link copied (``offset``), and how it was found."""

    offset: int | None
    compared: int
    why: str


def first_difference(source: ClusterClient, target: ClusterClient, topic: str, partition: int, checkpoint: int,
                     earliest: int, end: int, last: LastRead | None, timeout: float) -> Difference:
    """The first source offset below ``checkpoint`` from which the link must copy again after a truncation.

    The target's copies stamped with this partition as their origin are compared
    with the source's records at the same offsets. A truncated log keeps a prefix
    and differs from some offset on, so a binary search finds it with a few reads
    of single records. ``last``: the checkpoint's last record read, if known.
    """
    top = min(end, checkpoint)
    copies = copy_contents(target, source.name, topic, partition, earliest, top, timeout)
    offsets = sorted(copies)
    if not offsets:
        return Difference(None, 0, f"{target.name} holds no copies stamped with {source.name} {topic}[{partition}] "
                                   f"as their origin between offsets {earliest} and {top}: nothing to compare")
    with _Reader(source, topic, partition, timeout) as reader:
        lo, hi = 0, len(offsets)
        while lo < hi:  # the first copy whose source record differs
            mid = (lo + hi) // 2
            if reader.same(offsets[mid], copies[offsets[mid]]):
                lo = mid + 1
            else:
                hi = mid
        if lo < len(offsets):
            at = offsets[lo - 1] + 1 if lo else earliest
            return Difference(at, len(offsets), f"the source's record at offset {offsets[lo]} differs from its copy "
                                                f"on {target.name}" + (f"; the one at {offsets[lo - 1]} is the same"
                                                                       if lo else ""))
        changed_last = (last is not None and last.offset < top
                        and not reader.same(last.offset, int(last.fingerprint, 16)))
    if end < checkpoint or changed_last:
        return Difference(offsets[-1] + 1, len(offsets),
                          f"the {len(offsets)} copies on {target.name} up to offset {offsets[-1]} match the source; "
                          + (f"the source ends at {end}" if end < checkpoint
                             else f"the record at {last.offset if last else '?'} differs"))
    return Difference(None, len(offsets), f"the source's records match the {len(offsets)} copies on {target.name} "
                                          f"and reach the checkpoint {checkpoint}: nothing differs")


class _Reader:
    """A ``read_committed`` reader of one source partition that reads single records (bounded reads)."""

    def __init__(self, source: ClusterClient, topic: str, partition: int, timeout: float) -> None:
        self.topic, self.partition = source.physical(topic), partition  # ``topic`` is the logical name
        self.reader = RangeReader.open(source, HISTORY_GROUP, timeout=timeout, doing="read again")

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.reader.close()

    def same(self, offset: int, expected: int) -> bool:
        """Whether the record at ``offset`` has the key and value of crc ``expected``.

        A record compacted away counts as the same (nothing to compare); one past the log's end as different.
        Records deleted (or a log truncated) since the caller read the source's offsets are
        :class:`~mirrorflow.errors.OffsetGone`: no answer is guessed for them.
        """
        for msg in self.reader.range(self.topic, self.partition, offset, offset + 1, until_log_end=True):
            return content(msg.key(), msg.value()) == expected
        return self.reader.log_end(self.topic, self.partition) is None  # a higher offset came: compacted away
