"""What one measurement reports: a row per link- or group-partition, and a violation per row over its bound.

Rows are plain dataclasses because the snapshot stores them as they are
(``dataclasses.asdict``): their fields are the snapshot's JSON format
(docs/lag.md, "Snapshot format").
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``topic`` of a row that stands for a whole link, group or cluster (an error, or a group without offsets).
WHOLE = "*"


@dataclass
class LinkPartitionLag:
    """Lag of one link on one source topic-partition (or, with ``topic == "*"``, why the link was not measured)."""

    link_id: str
    level: int
    source: str
    target: str
    topic: str
    partition: int | None
    #: Offsets not yet copied; ``None`` when not measured (see ``error``).
    records: int | None
    #: Age of the oldest message not yet copied; ``None`` when unknown (see ``note``).
    seconds: float | None = None
    #: The link's committed position on its current target (``None``: nothing copied yet).
    checkpoint: int | None = None
    #: Where the next copy starts: the checkpoint, or the source's first offset if that is later.
    start: int | None = None
    #: The source's last stable offset when measured.
    end: int | None = None
    #: The source's high watermark when measured: ``end`` unless a transaction is open on the partition.
    high: int | None = None
    #: Records that wait behind an open transaction (``high - end``): no copy passes the last stable
    #: offset until the transaction ends, so they count in ``records`` too.
    held: int = 0
    #: Age of the open transaction that holds them (from its first record's CreateTime); ``None``: none open.
    open_transaction_s: float | None = None
    #: CreateTime (ms) of the oldest message not yet copied.
    oldest_timestamp: int | None = None
    #: Offsets the source deleted before the link copied them (checkpoint below the source's first
    #: offset): a violation whatever the bounds, since nothing can copy them any more.
    gap: int = 0
    #: The checkpoint is past the source's end: the source partition was truncated (or recreated).
    truncated: bool = False
    #: The link had a checkpoint here at the previous measurement and has none now (expired,
    #: deleted, or the link's id changed): the next level run refuses or would copy again.
    checkpoint_missing: bool = False
    note: str | None = None
    error: str | None = None

    @property
    def where(self) -> str:
        place = f"link {self.link_id} ({self.source} -> {self.target})"
        return place if self.topic == WHOLE else f"{place} {self.topic}[{self.partition}]"


def open_transaction(row: LinkPartitionLag) -> str:
    """What an open transaction on the source holds back (the note, the violation and the page say it alike)."""
    age = "of unknown age" if row.open_transaction_s is None else f"open for {row.open_transaction_s:g}s"
    return (f"{row.held} records wait behind a transaction {age} on {row.source} at offset {row.end}: no copy "
            f"passes it until its producer commits or aborts it (or transaction.timeout.ms aborts it)")


@dataclass
class GroupPartitionLag:
    """Lag of one consumer group on one topic-partition of one cluster.

    With ``topic == "*"`` the row stands for the whole group (it has no committed
    offset on the measured topics) or, with ``group == "*"``, for the whole
    cluster (its groups could not be measured: see ``error``).
    """

    cluster: str
    group: str
    topic: str
    partition: int | None
    records: int | None
    seconds: float | None = None
    committed: int | None = None
    end: int | None = None
    oldest_timestamp: int | None = None
    #: The group's state (``stable``, ``empty``, ...) and member count, when known.
    state: str | None = None
    members: int | None = None
    note: str | None = None
    error: str | None = None

    @property
    def where(self) -> str:
        if self.group == WHOLE:
            return f"cluster {self.cluster}"
        place = f"group {self.group} on {self.cluster}"
        return place if self.topic == WHOLE else f"{place} {self.topic}[{self.partition}]"


@dataclass(frozen=True)
class Violation:
    """One row over its bound (or not measurable while a bound applies), in words."""

    kind: str  # "link" or "group"
    where: str
    text: str

    def __str__(self) -> str:
        return self.text


def join_notes(a: str | None, b: str) -> str:
    """``b`` appended to a row's note ``a`` (a row may collect several remarks in one measurement)."""
    return b if not a else f"{a}; {b}"
