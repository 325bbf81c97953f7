"""The sensor base every mirrorflow wait shares: check once in the worker, then poke or defer to a trigger.

:class:`PollingSensor` is the sensor side of :class:`~mirrorflow_airflow.triggers.base.PollingTrigger`
(``triggers/base.py``): a subclass names one check of the triggers and says how
to call it; the base checks once in the worker (no deferral when the condition
already holds, and configuration mistakes fail at once), then hands the wait to
the triggerer, which runs the very same check. With ``deferrable=False`` it
pokes like any sensor. Either way a timeout fails the task with the last
measurement, so the log says what was still missing.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout

from mirrorflow.lag import DEFAULT_TIMEOUT
from mirrorflow_airflow.triggers.base import CheckResult, PollingTrigger, run_check

#: Extra time the scheduler gives a deferred sensor beyond its own deadline: a safety net
#: for a lost triggerer; normally the trigger fires its own "timeout" event first.
DEFER_GRACE = timedelta(minutes=2)


class PollingSensor(BaseSensorOperator):
    """A sensor on one check of :mod:`mirrorflow_airflow.triggers.base`: poke it, or defer to its trigger.

    Subclasses name the ``check`` (dotted path) and implement :meth:`check_kwargs`,
    :meth:`make_trigger` and :meth:`what`. Details the check returns under
    ``lagging`` / ``lagging_count`` / ``bound`` / ``table`` make the timeout
    message; the last detail is the task's return value. ``tree``: the namespace of
    the tree to check when one Airflow runs several (docs/naming.md); ``""``, the
    default, is the tree without one.
    """

    check: str
    ui_color = "#d9edf7"

    def __init__(self, *, deferrable: bool = True, poke_interval: float = 30, timeout: float = 3600,
                 max_errors: int = 3, check_timeout: float = DEFAULT_TIMEOUT, tree: str = "", **kwargs: Any) -> None:
        super().__init__(poke_interval=poke_interval, timeout=timeout, **kwargs)
        self.deferrable = deferrable
        self.max_errors = max_errors
        self.check_timeout = check_timeout
        #: The namespace of the tree to check when one Airflow runs several (``""``: the only tree).
        self.tree = tree
        self._last: dict[str, Any] | None = None

    def check_kwargs(self) -> dict[str, Any]:
        raise NotImplementedError

    def make_trigger(self, deadline: float) -> PollingTrigger:
        raise NotImplementedError

    def what(self) -> str:
        raise NotImplementedError

    def _check(self) -> CheckResult:
        result = run_check(self.check, self.check_kwargs(), ns=self.tree)
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
