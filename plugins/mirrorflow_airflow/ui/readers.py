"""Read what the mirrorflow DAGs stored, in the API server, into :class:`mirrorflow.status.StatusInputs`.

The API server may read the metadata database directly (tasks may not): the
Variables the DAGs write, the latest runs of every ``mirror_*`` DAG with their
task states and result XComs, and the tasks running now: those of one tree
(``<name>.mirror_*`` when one Airflow runs several). Reading only, and a
bounded number of rows per DAG, so the page costs the database little.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from airflow.configuration import conf
from airflow.models import Variable
from airflow.models.crypto import get_fernet
from airflow.models.dag import DagModel
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from airflow.utils.log.log_reader import TaskLogReader
from sqlalchemy import select
from sqlalchemy.orm import Session

from mirrorflow.status import forms
from mirrorflow.status.inputs import DagInfo, RunInfo, RunningTask, StatusInputs
from mirrorflow.topology import Topology, in_tree
from mirrorflow_airflow.state import (
    AUDIT_RESULT_VARIABLE,
    COPY_TOTALS_PREFIX,
    LAG_SNAPSHOT_VARIABLE,
    OWNERS_VARIABLE,
    TARGETS_VARIABLE,
)

#: Latest runs read per DAG.
RUNS_READ = 5
#: Task whose XCom is a run's result, per DAG (a level run's copy summary).
RESULT_TASKS = {"copy"}
PREFIX = "mirror_"
#: Running tasks read (oldest first), each with its log's last progress line.
RUNNING_READ = 20
#: A progress line (mirrorflow.progress): ``progress <what>: <numbers>``.
PROGRESS_LINE = re.compile(r"\bprogress (?:level|backfill|archive|completeness) [^\n]+")


def ui_base() -> str:
    """The UI's path prefix (``[api] base_url``), so the page's links work behind a proxy path too."""
    return urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")


def text_variable(session: Session, key: str) -> str | None:
    """A Variable's value as stored (decrypted), or ``None``; read as :func:`json_variable` says why."""
    row = session.execute(select(Variable._val, Variable.is_encrypted).where(Variable.key == key)).first()
    if row is None:
        return None
    raw, encrypted = row
    if raw is not None and encrypted:
        raw = get_fernet().decrypt(raw.encode()).decode()
    return raw


def json_variable(session: Session, key: str) -> Any:
    """A Variable's JSON value, or ``None``.

    Read as two columns, not as a ``Variable``: loading the row as one offers its
    whole value to Airflow's secrets masker, which escapes every form of it before
    it looks at the name (none of these names is a sensitive one), and the copy
    totals and the lag snapshot of a large tree are large values
    (docs/benchmarks.md, "The partition axis again").
    """
    raw = text_variable(session, key)
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return None


def _totals(session: Session, levels: Iterable[int], ns: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for level in levels:
        data = json_variable(session, in_tree(ns, f"{COPY_TOTALS_PREFIX}{level}")) or {}
        merged.update(data.get("partitions") or {})
    return {"partitions": merged}


def _dags(session: Session, base: str, ns: str) -> dict[str, DagInfo]:
    """The tree's DAGs by their single-tree ids (``mirror_level_1`` for ``prod.mirror_level_1`` of tree ``prod``)."""
    out = {}
    prefix = in_tree(ns, PREFIX)
    models = session.scalars(select(DagModel).where(DagModel.dag_id.startswith(prefix))).all()
    for model in models:
        runs = session.scalars(select(DagRun).where(DagRun.dag_id == model.dag_id)
                               .order_by(DagRun.run_after.desc()).limit(RUNS_READ)).all()
        ids = [run.run_id for run in runs]  # one query each for the runs' tasks and results, not one per run
        tasks_of: dict[str, dict[str, str]] = {i: {} for i in ids}
        for run_id, task_id, state in session.execute(select(
                TaskInstance.run_id, TaskInstance.task_id, TaskInstance.state).where(
                TaskInstance.dag_id == model.dag_id, TaskInstance.run_id.in_(ids))):
            tasks_of[run_id][task_id] = str(state) if state is not None else "none"
        results: dict[str, dict[str, Any]] = {}
        for xcom in session.scalars(select(XComModel).where(
                XComModel.dag_id == model.dag_id, XComModel.run_id.in_(ids), XComModel.task_id.in_(RESULT_TASKS),
                XComModel.key == "return_value")):
            value = XComModel.deserialize_value(xcom)
            if isinstance(value, dict):
                results.setdefault(xcom.run_id, value)
        infos = []
        for run in runs:
            tasks = tasks_of[run.run_id]
            logs = {t: forms.task_log_url(base, model.dag_id, run.run_id, t) for t in tasks}
            failed = [t for t, s in tasks.items() if s == "failed"]
            infos.append(RunInfo(
                dag_id=model.dag_id, run_id=run.run_id, state=str(run.state), started=run.start_date,
                ended=run.end_date, result=results.get(run.run_id), tasks=tasks, task_logs=logs,
                log_url=logs[failed[0]] if failed else forms.run_url(base, model.dag_id, run.run_id)))
        out[model.dag_id[len(prefix) - len(PREFIX):]] = DagInfo(
            model.dag_id, paused=model.is_paused, next_run=model.next_dagrun_create_after, runs=tuple(infos))
    return out


def latest_progress(ti: Any) -> dict[str, Any] | None:
    """The last progress line (:mod:`mirrorflow.progress`) in the log of a running task, if it logged one.

    Read with Airflow's own log reader, so it works wherever the task's log is
    (a local file, a worker's log server, remote storage). A log that cannot be
    read gives ``None``: the page then shows the task without its progress.
    """
    try:
        chunks, _ = TaskLogReader().read_log_chunks(ti, ti.try_number, {"end_of_log": False})
        line = None
        for message in chunks:  # the driver's lines under spark-submit come wrapped in its log format
            found = PROGRESS_LINE.search(str(getattr(message, "event", "")))
            if found:
                line = {"line": found.group(0), "at": message.timestamp.isoformat() if message.timestamp else None}
        return line
    except Exception:  # a log server down, a rotated file: the task is still shown
        return None


def _running(session: Session, base: str, ns: str) -> tuple[RunningTask, ...]:
    tis = session.scalars(select(TaskInstance).where(TaskInstance.dag_id.startswith(in_tree(ns, PREFIX)),
                                                     TaskInstance.state == "running")
                          .order_by(TaskInstance.start_date).limit(RUNNING_READ)).all()
    return tuple(RunningTask(ti.dag_id, ti.run_id, ti.task_id, ti.start_date,
                             forms.task_log_url(base, ti.dag_id, ti.run_id, ti.task_id), latest_progress(ti))
                 for ti in tis)


def read_inputs(session: Session, topology: Topology, now: datetime | None = None) -> StatusInputs:
    """Everything the page shows, as stored now."""
    base, ns = ui_base(), topology.namespace
    return StatusInputs(
        now=now or datetime.now(UTC),
        lag=json_variable(session, in_tree(ns, LAG_SNAPSHOT_VARIABLE)),
        audit=json_variable(session, in_tree(ns, AUDIT_RESULT_VARIABLE)),
        targets={str(k): str(v) for k, v in (json_variable(session, in_tree(ns, TARGETS_VARIABLE)) or {}).items()},
        owners={str(k): str(v) for k, v in (json_variable(session, in_tree(ns, OWNERS_VARIABLE)) or {}).items()},
        totals=_totals(session, topology.levels, ns),
        dags=_dags(session, base, ns),
        running=_running(session, base, ns),
        base_url=base,
        tree=ns,
    )
