"""Sensors that wait until replication lag, or a consumer group's lag, is within a bound.

Typical uses: hold a failover until the links into the new cluster caught up;
gate a downstream batch on its input being mirrored; wait for a group to drain
before moving it.

Both sensors are deferrable by default: they check once in the worker (no
deferral when the bound already holds, and configuration mistakes such as an
unknown link id fail at once), then hand the wait to the triggerer
(:mod:`mirrorflow_airflow.triggers.lag`), which runs the very same check. With
``deferrable=False`` they poke like any sensor (``mode="poke"`` or
``"reschedule"``). Either way a timeout fails the task with the lag table of
the last measurement, so the log says what was still behind.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from mirrorflow.lag import DEFAULT_TIMEOUT
from mirrorflow_airflow.triggers.base import CheckResult, PollingTrigger, run_check
from mirrorflow_airflow.triggers.lag import ConsumerGroupLagTrigger, ReplicationLagTrigger

#: Extra time the scheduler gives a deferred sensor beyond its own deadline: a safety net
#: for a lost triggerer; normally the trigger fires its own "timeout" event first.
DEFER_GRACE = timedelta(minutes=2)


class PollingSensor(BaseSensorOperator):
    """A sensor on one check of :mod:`mirrorflow_airflow.triggers.base`: poke it, or defer to its trigger.

    Subclasses name the ``check`` (dotted path) and implement :meth:`check_kwargs`,
    :meth:`make_trigger` and :meth:`what`. Details the check returns under
    ``lagging`` / ``lagging_count`` / ``bound`` / ``table`` make the timeout
    message; the last detail is the task's return value.
    """

    check: str
    ui_color = "#d9edf7"

    def __init__(self, *, deferrable: bool = True, poke_interval: float = 30, timeout: float = 3600,
                 max_errors: int = 3, check_timeout: float = DEFAULT_TIMEOUT, **kwargs: Any) -> None:
        super().__init__(poke_interval=poke_interval, timeout=timeout, **kwargs)
        self.deferrable = deferrable
        self.max_errors = max_errors
        self.check_timeout = check_timeout
        self._last: dict[str, Any] | None = None

    def check_kwargs(self) -> dict[str, Any]:
        raise NotImplementedError

    def make_trigger(self, deadline: float) -> PollingTrigger:
        raise NotImplementedError

    def what(self) -> str:
        raise NotImplementedError

    def _check(self) -> CheckResult:
        result = run_check(self.check, self.check_kwargs())
        self._last = result.detail
        self.log.info("%s", result.summary)
        return result

    def poke(self, context: Any) -> PokeReturnValue:
        result = self._check()
        return PokeReturnValue(is_done=result.done, xcom_value={**result.detail, "status": "done"})

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                raise AirflowSensorTimeout(self._failure(f"{exc}", self._last)) from exc
        result = self._check()
        if result.done:
            return {**result.detail, "status": "done", "polls": 0}
        self.log.info("deferring: the triggerer checks %s every %ss for up to %ss", self.what(), self.poke_interval,
                      self.timeout)
        self.defer(trigger=self.make_trigger(deadline=time.time() + self.timeout), method_name="execute_complete",
                   timeout=timedelta(seconds=self.timeout) + DEFER_GRACE)

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        event = dict(event or {})
        status = event.get("status")
        if status == "done":
            self.log.info("%s: within the bound after %s polls", self.what(), event.get("polls"))
            return event
        if status == "timeout":
            raise AirflowSensorTimeout(self._failure(f"timed out after {self.timeout}s ({event.get('polls')} polls)",
                                                     event))
        raise AirflowException(self._failure(f"the check failed: {event.get('error', event)}", event))

    def _failure(self, headline: str, detail: dict[str, Any] | None) -> str:
        if not detail:
            return f"{self.what()}: {headline}; no measurement was completed"
        lines = "\n  ".join(detail.get("lagging") or ["(nothing over the bound in the last measurement)"])
        more = detail.get("lagging_count", 0) - len(detail.get("lagging") or [])
        tail = f"\n  ... and {more} more" if more > 0 else ""
        return (f"{self.what()}: {headline}. Still over the bound "
                f"(records <= {detail.get('bound', {}).get('records')}, "
                f"seconds <= {detail.get('bound', {}).get('seconds')}):\n  {lines}{tail}\n"
                f"{detail.get('table', '')}")


class ReplicationLagSensor(PollingSensor):
    """Wait until links are within ``max_records`` uncopied records and ``max_seconds`` of age.

    :param links: link ids (``c1.L3``); ``None`` for every link of every level.
    :param topics: topic names or regexes narrowing the topology's topics; ``None`` for all.
    :param max_records: most records a link-partition may still have to copy (0: fully caught up).
    :param max_seconds: oldest age a not-yet-copied message may have; ``None``: not checked.
    :param deferrable: wait in the triggerer (default) instead of a worker slot.
    """

    check = ReplicationLagTrigger.CHECK
    template_fields: Sequence[str] = ("links", "topics")

    def __init__(self, *, links: list[str] | None = None, topics: list[str] | None = None, max_records: int = 0,
                 max_seconds: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.links, self.topics = links, topics
        self.max_records, self.max_seconds = max_records, max_seconds

    def check_kwargs(self) -> dict[str, Any]:
        return {"links": None if self.links is None else list(self.links),
                "topics": None if self.topics is None else list(self.topics),
                "max_records": self.max_records, "max_seconds": self.max_seconds, "timeout": self.check_timeout}

    def make_trigger(self, deadline: float) -> PollingTrigger:
        return ReplicationLagTrigger(**self.check_kwargs(), poll_interval=self.poke_interval, deadline=deadline,
                                     max_errors=self.max_errors)

    def what(self) -> str:
        return f"replication lag of {', '.join(self.links) if self.links else 'every link'}"


class ConsumerGroupLagSensor(PollingSensor):
    """Wait until consumer groups on one cluster are within ``max_records`` (and ``max_seconds``).

    :param cluster: the cluster (topology name) where the groups consume.
    :param groups: group names or regexes (full match); each must match a group with committed offsets.
    :param max_records: most records a group may still have to consume per partition.
    :param max_seconds: oldest age of an unconsumed message; ``None``: not checked.
    """

    check = ConsumerGroupLagTrigger.CHECK
    template_fields: Sequence[str] = ("cluster", "groups")

    def __init__(self, *, cluster: str, groups: list[str], max_records: int = 0, max_seconds: float | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster, self.groups = cluster, groups
        self.max_records, self.max_seconds = max_records, max_seconds

    def check_kwargs(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "groups": list(self.groups), "max_records": self.max_records,
                "max_seconds": self.max_seconds, "timeout": self.check_timeout}

    def make_trigger(self, deadline: float) -> PollingTrigger:
        return ConsumerGroupLagTrigger(**self.check_kwargs(), poll_interval=self.poke_interval, deadline=deadline,
                                       max_errors=self.max_errors)

    def what(self) -> str:
        return f"lag of groups {', '.join(self.groups)} on {self.cluster}"
