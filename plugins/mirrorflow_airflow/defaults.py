"""Defaults every mirrorflow DAG shares, so the DagBag test can hold them to it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

OWNER = "mirrorflow"
TAG = "mirrorflow"

DEFAULT_ARGS = {
    "owner": OWNER,
    "retries": 2,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": True,
}

# A fixed start in the past; with catchup off only the latest interval runs.
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)


def tags(*extra: str) -> list[str]:
    return [TAG, *extra]
