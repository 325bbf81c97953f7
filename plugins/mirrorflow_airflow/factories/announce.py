"""The ``announce`` task: the arrival assets Airflow does not know yet, emitted one task at a time.

Wired after every task that emits arrivals (a level's ``copy``, the onboarding's
``backfill``, a gap's ``resolve``). That task emits what Airflow has an asset for and
holds back the rest; ``announce`` emits those in the pool ``mirrorflow_assets`` (one
slot), so no two tasks ever create the same asset at once, which Airflow 3.3 answers by
failing one of them. With nothing held, the upstream task skips it and no process starts
(:func:`mirrorflow_airflow.assets.finish_with_arrivals`, docs/assets.md "New assets").

``after_failure``: it also runs when the upstream task failed, and then announces every
arrival that task held (Airflow 3.3 registers a task's outlet events only when it succeeds,
so a run where one partition failed would announce nothing of the topics that advanced).
It is then a teardown task: Airflow leaves teardowns out of a run's state, so the run stays
failed, red, while the topics that advanced get their events (docs/assets.md).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import TriggerRule, task

from mirrorflow_airflow.assets import ANNOUNCE_POOL, ANNOUNCE_TASK, ARRIVALS, announce


def announce_task(upstream: str, *, after_failure: bool = False) -> Any:
    """The ``announce`` task of ``upstream``'s held arrivals (its return value's ``"announce"``).

    With ``after_failure``, a teardown that runs unless ``upstream`` was skipped (see the module).
    """

    @task(task_id=ANNOUNCE_TASK, pool=ANNOUNCE_POOL, outlets=[ARRIVALS])
    def announce_(ti: Any = None, outlet_events: Any = None) -> list[str]:
        """Emit the arrival assets the task before held back: new to Airflow, so created here, one at a time."""
        held = (ti.xcom_pull(task_ids=upstream) or {}).get("announce") or []
        return announce(outlet_events, held)

    out = announce_()
    if after_failure:
        operator = out.operator  # type: ignore[attr-defined]  # a PlainXComArg: one task's return value
        operator.as_teardown()
        # a teardown's rule would run it after a skipped upstream too (a run outside its windows): not needed there
        operator.trigger_rule = TriggerRule.NONE_SKIPPED
    return out
