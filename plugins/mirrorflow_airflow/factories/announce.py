"""The ``announce`` task: the arrival assets Airflow does not know yet, emitted one task at a time.

Wired after every task that emits arrivals (a level's ``copy``, the onboarding's
``backfill``, a gap's ``resolve``). That task emits what Airflow has an asset for and
holds back the rest; ``announce`` emits those in the pool ``mirrorflow_assets`` (one
slot), so no two tasks ever create the same asset at once, which Airflow 3.3 answers by
failing one of them. With nothing held, the upstream task skips it and no process starts
(:func:`mirrorflow_airflow.assets.finish_with_arrivals`, docs/assets.md "New assets").
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import task

from mirrorflow_airflow.assets import ANNOUNCE_POOL, ANNOUNCE_TASK, ARRIVALS, announce


def announce_task(upstream: str) -> Any:
    """The ``announce`` task of ``upstream``'s held arrivals (its return value's ``"announce"``)."""

    @task(task_id=ANNOUNCE_TASK, pool=ANNOUNCE_POOL, outlets=[ARRIVALS])
    def announce_(ti: Any = None, outlet_events: Any = None) -> list[str]:
        """Emit the arrival assets the task before held back: new to Airflow, so created here, one at a time."""
        held = (ti.xcom_pull(task_ids=upstream) or {}).get("announce") or []
        return announce(outlet_events, held)

    return announce_()
