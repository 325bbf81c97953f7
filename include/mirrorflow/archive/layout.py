"""The archive's object keys: one place that says where everything is.

Data (Hive-style ``name=value`` segments, so Spark, Athena or DuckDB can prune by
cluster, topic, partition and date without a catalogue)::

    <prefix>/data/cluster=<c>/topic=<t>/partition=<p>/date=<YYYY-MM-DD>/<from offset, 20 digits>.parquet

``date`` is the UTC date of the message timestamps in the object. ``from offset``
is where the run that wrote the object started reading the partition (for the
first object of a date in that run), zero-padded so keys sort in offset order.
Keying by the run's *start*, not by what it found, is what makes a repeated run
idempotent: the same start gives the same keys, and S3 replaces them.

One manifest per run and cluster (UTC start time first, so keys sort by time)::

    <prefix>/manifests/cluster=<c>/<yyyymmddTHHMMSS>-<sanitised run id>.json

The archive's progress per cluster, ``{topic: {partition: {"first", "next"}}}``::

    <prefix>/progress/cluster=<c>.json

Reading ``<prefix>/data/`` directly (Spark, Athena) works (the ``topic`` and
``partition`` columns agree with the path) but sees every object, including
ones a failed run uploaded that no manifest lists; :mod:`.reader` reads only
what the manifests vouch for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from mirrorflow.archive.errors import ArchiveError

OFFSET_DIGITS = 20
#: The date of a record without a timestamp (Kafka reports -1): kept, never dropped.
NO_TIMESTAMP_DATE = "1970-01-01"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DATA_KEY = re.compile(
    r"^(?:(?P<prefix>.*)/)?data/cluster=(?P<cluster>[^/]+)/topic=(?P<topic>[^/]+)/partition=(?P<partition>\d+)/"
    r"date=(?P<date>\d{4}-\d{2}-\d{2})/(?P<start>\d{20})\.parquet$"
)
_MAX_RUN_ID = 120


def _join(prefix: str, *parts: str) -> str:
    return "/".join(p for p in (prefix.strip("/"), *parts) if p)


def _name(what: str, value: str) -> str:
    """Cluster and topic names go into keys as they are; refuse the few that would break a key."""
    if not value or "/" in value or "=" in value or value in (".", ".."):
        raise ArchiveError(f"{what} name {value!r} cannot be part of an archive key ('/', '=' or empty)")
    return value


def sanitise_run_id(run_id: str) -> str:
    """A run id made safe for one key segment: runs of other characters become ``_``.

    Airflow's run ids (``scheduled__2024-05-01T10:00:00+00:00``) carry ``:`` and ``+``,
    which S3 accepts but URLs and shells do not like; long ids are cut.
    """
    cleaned = _UNSAFE.sub("_", run_id or "").strip("._")
    return (cleaned or "run")[:_MAX_RUN_ID]


def utc_date(timestamp_ms: int) -> str:
    """``YYYY-MM-DD`` of a Kafka timestamp in UTC; records without one (< 0) get 1970-01-01.

    Timestamps beyond what a date can hold (CreateTime is whatever a producer
    sent) are clamped to 9999-12-31 rather than failing the partition.
    """
    if timestamp_ms < 0:
        return NO_TIMESTAMP_DATE
    try:
        return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).date().isoformat()
    except (OverflowError, ValueError, OSError):
        return "9999-12-31"


def _date_text(value: str | date) -> str:
    text = value.isoformat() if isinstance(value, date) else str(value)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise ArchiveError(f"archive date {value!r} is not YYYY-MM-DD")
    return text


def topic_prefix(prefix: str, cluster: str, topic: str) -> str:
    """``<prefix>/data/cluster=<c>/topic=<t>`` (no trailing slash): a topic's data, as lineage names it."""
    return _join(prefix, "data", f"cluster={_name('cluster', cluster)}", f"topic={_name('topic', topic)}")


def partition_prefix(prefix: str, cluster: str, topic: str, partition: int) -> str:
    """``<prefix>/data/cluster=<c>/topic=<t>/partition=<p>/`` (with the trailing slash, for listing)."""
    return f"{topic_prefix(prefix, cluster, topic)}/partition={int(partition)}/"


def data_key(prefix: str, cluster: str, topic: str, partition: int, day: str | date, start: int) -> str:
    if start < 0:
        raise ArchiveError(f"archive key for {topic}[{partition}]: negative start offset {start}")
    return (partition_prefix(prefix, cluster, topic, partition)
            + f"date={_date_text(day)}/{start:0{OFFSET_DIGITS}d}.parquet")


@dataclass(frozen=True)
class DataKey:
    prefix: str
    cluster: str
    topic: str
    partition: int
    date: str
    start: int


def parse_data_key(key: str) -> DataKey:
    """The parts of a data key; :class:`ArchiveError` naming the key if it is not one."""
    m = _DATA_KEY.fullmatch(key)
    if m is None:
        raise ArchiveError(f"{key!r} is not an archive data key")
    return DataKey(m["prefix"] or "", m["cluster"], m["topic"], int(m["partition"]), m["date"], int(m["start"]))


def manifests_prefix(prefix: str, cluster: str) -> str:
    return _join(prefix, "manifests", f"cluster={_name('cluster', cluster)}") + "/"


def manifest_key(prefix: str, cluster: str, started: datetime, run_id: str) -> str:
    """The run's manifest; ``started`` is the run's start (naive values are taken as UTC)."""
    at = started.astimezone(UTC) if started.tzinfo else started.replace(tzinfo=UTC)
    return manifests_prefix(prefix, cluster) + f"{at:%Y%m%dT%H%M%S}-{sanitise_run_id(run_id)}.json"


def progress_key(prefix: str, cluster: str) -> str:
    return _join(prefix, "progress", f"cluster={_name('cluster', cluster)}.json")
