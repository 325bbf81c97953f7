"""The header every mirrorflow DAG shares, written once: ``with mirror_dag(...) as dag:``.

Every mirrorflow DAG starts at the same fixed date, never catches up, runs one
at a time and takes the house defaults (owner, retries, the ``mirrorflow``
tag), all defined here; the DagBag test holds each DAG to them. A factory then
only says what is its own: the id, one line of description, the schedule, its
extra tags, its form, and its module docstring as the DAG's documentation.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG

OWNER = "mirrorflow"
TAG = "mirrorflow"

DEFAULT_ARGS = {
    "owner": OWNER,
    "retries": 2,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": True,
}

#: The Airflow pool (one slot) of every task that changes operator state shared between runs
#: (link targets, group owners, topology changes, onboardings): two such tasks never run at
#: once, on any worker, so neither loses the other's update; the second one waits, and its
#: task details say for which pool. deploy/pools.json creates it (docs/platform.md).
OPERATIONS_POOL = "mirrorflow_operations"

# A fixed start in the past; with catchup off only the latest interval runs.
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)


def tags(*extra: str) -> list[str]:
    """The house tag, then ``extra``."""
    return [TAG, *extra]


def mirror_dag(dag_id: str, *, description: str, schedule: Any, doc_md: str | None, tags: tuple[str, ...] = (),
               params: Mapping[str, Any] | None = None, retries: int | None = None,
               max_active_runs: int = 1) -> DAG:
    """A DAG with the house header; ``tags`` come after ``mirrorflow``, ``retries`` overrides the default one."""
    default_args = DEFAULT_ARGS if retries is None else {**DEFAULT_ARGS, "retries": retries}
    return DAG(
        dag_id=dag_id,
        description=description,
        schedule=schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=max_active_runs,
        default_args=default_args,
        tags=[TAG, *tags],
        doc_md=doc_md,
        params=dict(params) if params is not None else None,
    )
