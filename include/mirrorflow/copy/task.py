"""What the planner hands a copier, and what the copier hands back.

Plain data on both sides of the Spark boundary: a :class:`PartitionTask` is
pickled to an executor, a :class:`PartitionResult` comes back as a dict
(:meth:`PartitionResult.to_dict`) for the job's journal lines and report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from mirrorflow import copyflags
from mirrorflow.defaults import DEFAULT_ON_GAP, DEFAULT_TXN_RECORDS, TXN_SECONDS

#: The ``on_gap`` policies.
OnGap = Literal["fail", "skip", "restore"]


@dataclass(frozen=True)
class PartitionTask:
    """One unit of work planned by the driver."""

    link_id: str
    level: int
    source: str
    target: str
    #: The logical name: what stamps, checkpoints' keys, errors and reports speak.
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
    #: When the link's replication window closes (epoch seconds; ``None``: no window, or one that does
    #: not close within a week): the copy commits what it has read and takes no more, the rest
    #: waits for the next window.
    stop_at: float | None = None
    #: This partition's share of the link's byte-rate cap.
    max_bytes_per_second: float | None = None
    #: The target topic's max.message.bytes, when the planner knows it: the copier's producer sends
    #: nothing larger, so a record over it stops its partition at its exact offset, by name.
    max_message_bytes: int | None = None
    #: The source topic's max.message.bytes, when the planner knows it (for that error's sentence).
    source_max_message_bytes: int | None = None
    on_malformed: copyflags.OnMalformed = "fresh"
    #: Onboarding only. Where to start when the link has no checkpoint yet
    #: (:data:`mirrorflow.copy.state.checkpoints.EARLIEST`:
    #: the source's first offset); that start is committed as the checkpoint even when
    #: there is nothing to copy, so the regular link continues exactly there.
    start_offset: int | None = None
    #: Onboarding only. Copy *every* message, whatever its flags, adding these bits: a
    #: backfill brings history the new cluster never had, and the bits make sure the
    #: new cluster's own distributors never send it on (see mirrorflow.onboard).
    backfill_flags: int | None = None
    #: Restore ``[start, end)`` from the S3 archive of the source cluster before reading Kafka:
    #: ``{"location": ArchiveLocation dict, "end": next archived offset}`` (onboarding from the
    #: archive; a retention gap healed with ``on_gap: restore``, mirrorflow.copy.heal.archive).
    restore: dict[str, Any] | None = None
    #: Onboarding from the archive: the copy must reach the source's first offset without a hole.
    require_contiguous: bool = False
    #: When the source no longer holds offsets the link has not copied: ``fail`` stops the partition
    #: naming the lost range; ``skip`` steps over them with a recorded loss; ``restore`` reads them from
    #: the source's archive (``restore`` above, planned by mirrorflow.copy.heal.archive), and stops like ``fail``
    #: when the planner could not (``replication`` key ``on_gap``).
    on_gap: OnGap = DEFAULT_ON_GAP
    #: The planner's estimate of the records this range holds (0: not estimated). The executor
    #: copies large ranges one at a time per Spark task (mirrorflow.copy.engine.executor).
    planned_records: int = 0
    #: Kafka's ids of the source and target topic when planned (``None``: not known). A checkpoint
    #: committed for other ids belongs to an earlier incarnation of a topic and is set aside.
    source_topic_id: str | None = None
    target_topic_id: str | None = None
    #: Commit the checkpoint again even with nothing to copy: it is old enough that Kafka would
    #: soon delete it (``offsets.retention.minutes`` after its last commit; mirrorflow.copy.plan).
    keep_alive: bool = False
    #: The source topic was recreated (the checkpoint is set aside): per origin cluster, the highest
    #: origin offset the target holds already, measured by the planner (mirrorflow.copy.state.held).
    held: tuple[tuple[str, int], ...] | None = None
    #: ``False`` (``replication`` key ``exactly_once: false``): at-least-once copies. No
    #: transactions: an idempotent producer, and the checkpoint committed once every copy
    #: before it is acknowledged. A killed or failed copy repeats up to one commit interval
    #: (``txn_records``, or ``txn_max_seconds`` of copying) on the next run, and nothing
    #: fences a zombie attempt.
    exactly_once: bool = True
    #: The topic's name on the source and on the target when the cluster renames it (``clusters.<c>.names``);
    #: ``None``: the logical name ``topic``. Read with :attr:`source_topic`, :attr:`target_topic`.
    source_name: str | None = None
    target_name: str | None = None

    @property
    def source_topic(self) -> str:
        """The name the copy reads on the source."""
        return self.source_name or self.topic

    @property
    def target_topic(self) -> str:
        """The name the copy writes, and commits its checkpoint on, on the target."""
        return self.target_name or self.topic


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
    #: Offsets the source deleted (retention) before this link copied them, and their range
    #: ``[first, last]`` (``None``: no loss).
    lost_to_retention: int = 0
    lost_offsets: list[int] | None = None
    #: Every lost range ``[first, last]`` in the order found (a gap at the start, then any that retention
    #: opened while the copy ran); ``lost_offsets`` is the first of them.
    lost_ranges: list[list[int]] = field(default_factory=list)
    #: Records restored from the S3 archive (onboarding with ``backfill: archive``, ``on_gap: restore``),
    #: and the source offsets ``[first, last]`` they were read for.
    restored: int = 0
    restored_offsets: list[int] | None = None
    #: The checkpoint this copy started without one and committed (onboarding hand-over).
    initialised: bool = False
    #: The source offset whose record is no longer the one the link read before its checkpoint
    #: (a truncated source, mirrorflow.copy.state.history); ``None``: the history is as copied.
    diverged_at: int | None = None
    #: The checkpoint was committed again with nothing to copy, so that Kafka does not expire it.
    kept_alive: bool = False
    #: The copy stopped before its planned end because the link's window closed (``next_offset`` is where).
    window_closed: bool = False
    #: Why the link's checkpoint was set aside (a recreated source or target topic), if it was.
    set_aside: str | None = None
    transactions: int = 0
    duration_s: float = 0.0
    #: Seconds spent waiting for the byte-rate cap.
    throttled_s: float = 0.0
    #: Records whose CreateTime was 0, copied at 1 ms: librdkafka cannot write 0 (it reads it as "now").
    retimed: int = 0
    #: The timestamp (epoch ms) of the newest record whose checkpoint was committed: how far the copy reaches
    #: in time (the asset events of mirrorflow_airflow say it). ``None``: nothing committed in this run.
    newest_ms: int | None = None
    error: str | None = None
    error_offset: int | None = None
    error_code: int | None = None
    fenced: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
