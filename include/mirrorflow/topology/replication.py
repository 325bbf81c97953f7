"""When and how fast links copy: schedules per level, replication windows, throttles, per-run limits.

All of it is optional (topology key ``replication``); a topology without it
copies every level every 5 minutes, all day, as fast as it can, with no per-run
cap. Settings under ``replication.defaults`` apply to every link and
``replication.links.<link id>`` overrides them key by key for one link.

Windows are ``[DAYS ]HH:MM-HH:MM[ ZONE]``, UTC unless a zone is named; one that
ends before it starts crosses midnight (``22:00-06:00``); see
:mod:`mirrorflow.topology.windows`. Schedules are a duration (``30s``, ``5m``, ``1h``),
a cron expression (``*/10 * * * *``), an Airflow preset (``@hourly``) or
``manual`` (no schedule: the DAG runs only when triggered). A level's schedule may
also be ``on_data``: a watcher in Airflow's triggerer starts a run when a link of
the level has records its checkpoint has not passed (``replication.on_data`` says
how often it looks and the least time between two runs it starts; docs/levels.md).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr, field_validator
from pydantic_core import PydanticCustomError

from mirrorflow.defaults import DEFAULT_COPY_THREADS
from mirrorflow.topology.base import Model
from mirrorflow.topology.windows import Window

#: A positive integer; booleans and strings are refused (``yes`` must not mean 1).
PositiveInt = Annotated[StrictInt, Field(gt=0)]

DEFAULT_SCHEDULE = "5m"
MIN_INTERVAL = timedelta(seconds=10)
#: A level schedule: runs start when data waits on a link's source, not on a clock.
ON_DATA = "on_data"

_DURATION = re.compile(r"^(\d+)(s|m|h)$")
_CRON_FIELD = re.compile(r"^[0-9*/,A-Za-z-]+$")
_PRESETS = frozenset({"@once", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight"})


# --------------------------------------------------------------------------- schedules


def parse_schedule(text: str) -> timedelta | str | None:
    """A schedule string as Airflow takes it: a ``timedelta``, a cron/preset string, or ``None`` (manual).

    Raises ``ValueError`` with a message a user can act on.
    """
    value = text.strip()
    if value == "manual":
        return None
    match = _DURATION.fullmatch(value)
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        unit_name = {"s": "seconds", "m": "minutes", "h": "hours"}[unit]
        try:
            delta = timedelta(**{unit_name: amount})
        except OverflowError:
            raise ValueError(f"schedule {text!r} is too long to be a schedule") from None
        if delta < MIN_INTERVAL:
            raise ValueError(f"schedule {text!r} is shorter than the minimum {int(MIN_INTERVAL.total_seconds())}s")
        return delta
    if value in _PRESETS:
        return value
    fields = value.split()
    if len(fields) == 5 and all(_CRON_FIELD.fullmatch(f) for f in fields):
        try:  # Airflow's own cron parser, where it is installed (the core does not require it)
            from croniter import croniter
        except ImportError:
            return value
        if croniter.is_valid(value):
            return value
        raise ValueError(f"schedule {text!r} is not a valid cron expression")
    raise ValueError(f"schedule {text!r} is not a duration (30s, 5m, 1h), a 5-field cron expression, "
                     f"an Airflow preset (@hourly, @daily, ...) or 'manual'")


def _check_schedule(value: str) -> str:
    try:
        parse_schedule(value)
    except ValueError as exc:
        raise PydanticCustomError("schedule", "{problem}", {"problem": str(exc)}) from None
    return value


def _check_level_schedule(value: str) -> str:
    """A level's schedule: any schedule, or ``on_data``."""
    if value.strip() == ON_DATA:
        return ON_DATA
    try:
        parse_schedule(value)
    except ValueError as exc:
        raise PydanticCustomError("schedule", "{problem}, or 'on_data'", {"problem": str(exc)}) from None
    return value


def parse_seconds(text: str, *, least: float = 1.0, most: float = 3600.0) -> float:
    """A short duration (``500ms``, ``2s``, ``1m``) in seconds, within ``[least, most]``."""
    match = re.fullmatch(r"(\d+)(ms|s|m)", text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration such as 500ms, 2s or 1m")
    seconds = int(match.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[match.group(2)]
    if not least <= seconds <= most:
        raise ValueError(f"{text!r} is outside {least:g}s..{most:g}s")
    return seconds


# --------------------------------------------------------------------------- windows


def _check_window(value: str) -> str:
    try:
        Window.parse(value)
    except ValueError as exc:
        raise PydanticCustomError("window", "{problem}", {"problem": str(exc)}) from None
    return value


# --------------------------------------------------------------------------- models


class LinkSettings(Model):
    """How one link copies. Every key is optional; unset keys fall back to ``replication.defaults``."""

    #: Windows in which the link may copy (topology/windows.py: days, times, a zone); outside them its runs skip it.
    windows: list[StrictStr] | None = None
    #: Cap on the link's copy rate, in bytes of keys and values per second (all partitions together).
    max_bytes_per_second: PositiveInt | None = None
    #: Per partition and run: copy at most this many source offsets.
    max_records_per_run: PositiveInt | None = None
    #: Per partition and run: stop after about this many bytes (at a transaction boundary).
    max_bytes_per_run: PositiveInt | None = None
    #: Source offsets per transaction, at most (a transaction also ends after ``TXN_SECONDS``):
    #: bounds what a killed task has to redo.
    txn_records: PositiveInt | None = None
    #: ``false``: at-least-once copies without transactions (a killed or failed copy duplicates
    #: up to one commit interval, ``txn_records`` or about a second of copying, on the target).
    exactly_once: StrictBool | None = None
    #: What a copy does when the source no longer holds offsets the link has not copied yet
    #: (retention, or records deleted): ``fail`` (the default) stops that partition naming the
    #: lost range; ``skip`` steps over it, records the loss and writes a ``gap`` journal line;
    #: ``restore`` reads the range from the source cluster's S3 archive (topology key ``archive``)
    #: and copies on from Kafka, or stops like ``fail`` naming what the archive does not hold.
    on_gap: Literal["fail", "skip", "restore"] | None = None

    @field_validator("windows")
    @classmethod
    def _windows(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value:
                raise PydanticCustomError("windows", "an empty list would never copy; omit windows to copy all day", {})
            for item in value:
                _check_window(item)
        return value

    def merged_over(self, base: LinkSettings) -> LinkSettings:
        """These settings, with unset keys taken from ``base``."""
        data = base.model_dump()
        data.update(self.model_dump(exclude_none=True))
        return LinkSettings(**data)

    def parsed_windows(self) -> list[Window] | None:
        return [Window.parse(w) for w in self.windows] if self.windows else None


class LevelSettings(Model):
    #: Overrides ``replication.schedule`` for this level's DAG.
    schedule: StrictStr | None = None

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        return value if value is None else _check_level_schedule(value)


class OnDataSettings(Model):
    """How the watcher of ``on_data`` levels looks for waiting records (``replication.on_data``)."""

    #: How often it asks each source for its end offsets and each target for the links' checkpoints.
    poll: StrictStr = "1s"
    #: The least time between two runs it starts for a level: a busy topic does not start a run per record.
    floor: StrictStr = "2s"

    @field_validator("poll", "floor")
    @classmethod
    def _duration(cls, value: str) -> str:
        try:
            parse_seconds(value, least=0.2)
        except ValueError as exc:
            raise PydanticCustomError("duration", "{problem}", {"problem": str(exc)}) from None
        return value

    @property
    def poll_seconds(self) -> float:
        return parse_seconds(self.poll, least=0.2)

    @property
    def floor_seconds(self) -> float:
        return parse_seconds(self.floor, least=0.2)


class ReplicationConfig(Model):
    """The ``replication`` key of the topology file (everything optional)."""

    #: Schedule of every ``mirror_level_<L>`` DAG unless ``levels.<L>.schedule`` says otherwise.
    schedule: StrictStr = DEFAULT_SCHEDULE
    levels: dict[StrictInt, LevelSettings] = Field(default_factory=dict)
    #: The watcher of the levels whose schedule is ``on_data``.
    on_data: OnDataSettings = Field(default_factory=OnDataSettings)
    defaults: LinkSettings = Field(default_factory=LinkSettings)
    links: dict[StrictStr, LinkSettings] = Field(default_factory=dict)
    #: Partitions each Spark task copies at the same time, each on its own thread.
    copy_threads: PositiveInt = DEFAULT_COPY_THREADS
    #: A ``mirror.copy.flags`` header mirrorflow did not write: ``fresh`` (the default) copies the
    #: record as produced here, ``fail`` stops its partition at it, by name (docs/copy-flags.md).
    #: One setting for every link: all distributors of a cluster must decide alike.
    on_malformed: Literal["fresh", "fail"] = "fresh"

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        return _check_level_schedule(value)

    def schedule_text(self, level: int) -> str:
        """The level's schedule as the topology writes it (``5m``, a cron line, ``manual``, ``on_data``)."""
        own = self.levels.get(level)
        return own.schedule if own is not None and own.schedule else self.schedule

    def on_data_at(self, level: int) -> bool:
        """Whether the level's runs start when data waits (``on_data``) rather than on a clock."""
        return self.schedule_text(level) == ON_DATA

    def schedule_for(self, level: int) -> timedelta | str | None:
        """The level's clock schedule as Airflow takes it; ``None`` for ``manual`` (and ``on_data``: no clock)."""
        return None if self.on_data_at(level) else parse_schedule(self.schedule_text(level))

    def link_settings(self, link_id: str) -> LinkSettings:
        own = self.links.get(link_id)
        return own.merged_over(self.defaults) if own is not None else self.defaults
