"""Read what the mirrorflow DAGs stored, in the API server, into :class:`mirrorflow.status.StatusInputs`.

The API server may read the metadata database directly (tasks may not): the
Variables the DAGs write, the latest runs of every ``mirror_*`` DAG with their
task states and result XComs, and the tasks running now. Reading only, and a
bounded number of rows per DAG, so the page costs the database little.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from sqlalchemy import select
from sqlalchemy.orm import Session

from mirrorflow.status import forms
from mirrorflow.status.inputs import DagInfo, RunInfo, RunningTask, StatusInputs
from mirrorflow.topology import Topology
from mirrorflow_airflow.state import COPY_TOTALS_PREFIX, OWNERS_VARIABLE, PROGRESS_VARIABLE, TARGETS_VARIABLE
from mirrorflow_airflow.steps.audit import RESULT_VARIABLE as AUDIT_VARIABLE
from mirrorflow_airflow.steps.lag_monitor import SNAPSHOT_VARIABLE as LAG_VARIABLE

#: Latest runs read per DAG.
RUNS_READ = 5
#: Task whose XCom is a run's result, per DAG (a level run's copy summary).
RESULT_TASKS = {"copy"}
PREFIX = "mirror_"


def ui_base() -> str:
    """The UI's path prefix (``[api] base_url``), so the page's links work behind a proxy path too."""
    from airflow.configuration import conf

    return urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")


def json_variable(session: Session, key: str) -> Any:
    from airflow.models import Variable

    row = session.scalar(select(Variable).where(Variable.key == key))
    if row is None:
        return None
    raw = row.val
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return None


def _totals(session: Session, levels: Iterable[int]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for level in levels:
        data = json_variable(session, f"{COPY_TOTALS_PREFIX}{level}") or {}
        merged.update(data.get("partitions") or {})
    return {"partitions": merged}


def _dags(session: Session, base: str) -> dict[str, DagInfo]:
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    out = {}
    models = session.scalars(select(DagModel).where(DagModel.dag_id.startswith(PREFIX))).all()
    for model in models:
        runs = session.scalars(select(DagRun).where(DagRun.dag_id == model.dag_id)
                               .order_by(DagRun.run_after.desc()).limit(RUNS_READ)).all()
        infos = []
        for run in runs:
            tis = session.execute(select(TaskInstance.task_id, TaskInstance.state).where(
                TaskInstance.dag_id == model.dag_id, TaskInstance.run_id == run.run_id)).all()
            tasks = {t: str(s) if s is not None else "none" for t, s in tis}
            logs = {t: forms.task_log_url(base, model.dag_id, run.run_id, t) for t in tasks}
            result = None
            xcom = session.scalars(select(XComModel).where(
                XComModel.dag_id == model.dag_id, XComModel.run_id == run.run_id,
                XComModel.task_id.in_(RESULT_TASKS), XComModel.key == "return_value")).first()
            if xcom is not None:
                value = XComModel.deserialize_value(xcom)
                result = value if isinstance(value, dict) else None
            failed = [t for t, s in tasks.items() if s == "failed"]
            infos.append(RunInfo(
                dag_id=model.dag_id, run_id=run.run_id, state=str(run.state), started=run.start_date,
                ended=run.end_date, result=result, tasks=tasks, task_logs=logs,
                log_url=logs[failed[0]] if failed else forms.run_url(base, model.dag_id, run.run_id)))
        out[model.dag_id] = DagInfo(model.dag_id, paused=model.is_paused, next_run=model.next_dagrun_create_after,
                                    runs=tuple(infos))
    return out


def _running(session: Session, base: str, progress: dict[str, Any]) -> tuple[RunningTask, ...]:
    from airflow.models.taskinstance import TaskInstance

    rows = session.execute(select(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id,
                                  TaskInstance.start_date).where(TaskInstance.dag_id.startswith(PREFIX),
                                                                 TaskInstance.state == "running")).all()
    return tuple(RunningTask(d, r, t, s, forms.task_log_url(base, d, r, t), progress.get(f"{d}/{r}/{t}"))
                 for d, r, t, s in rows)


def read_inputs(session: Session, topology: Topology, now: datetime | None = None) -> StatusInputs:
    """Everything the page shows, as stored now."""
    base = ui_base()
    return StatusInputs(
        now=now or datetime.now(UTC),
        lag=json_variable(session, LAG_VARIABLE),
        audit=json_variable(session, AUDIT_VARIABLE),
        targets={str(k): str(v) for k, v in (json_variable(session, TARGETS_VARIABLE) or {}).items()},
        owners={str(k): str(v) for k, v in (json_variable(session, OWNERS_VARIABLE) or {}).items()},
        totals=_totals(session, topology.levels),
        dags=_dags(session, base),
        running=_running(session, base, json_variable(session, PROGRESS_VARIABLE) or {}),
        base_url=base,
    )
