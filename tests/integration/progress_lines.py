"""The ``progress`` audit lines a job logged (mirrorflow.progress), for the integration tests' checks."""

from __future__ import annotations

import json

import pytest

from mirrorflow.progress import PROGRESS_ENV


def every_update(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Progress lines at every update (interval 0), captured at INFO."""
    monkeypatch.setenv(PROGRESS_ENV, "0")
    caplog.set_level("INFO", logger="mirrorflow.audit")
    caplog.set_level("INFO", logger="mirrorflow.progress")


def progress_lines(caplog: pytest.LogCaptureFixture, job: str, run_id: str | None = None) -> list[dict]:
    """The ``progress`` audit lines of ``job`` (``level``, ``backfill``, ``archive``, ``audit``), in order."""
    out = []
    for record in caplog.records:
        if record.name != "mirrorflow.audit":
            continue
        line = json.loads(record.getMessage())
        if line["event"] == "progress" and line["job"] == job and run_id in (None, line["run_id"]):
            out.append(line)
    return out


def spark_reported(lines: list[dict], tasks: int) -> bool:
    """Whether a line before the end carried Spark's own count of the job's ``tasks`` (status tracker, or
    a Connect server's progress reports): the final line's count is the job's, once its results are in."""
    return any(not l["final"] and l["measured"] == "spark_tasks" and l["tasks"] == tasks for l in lines)
