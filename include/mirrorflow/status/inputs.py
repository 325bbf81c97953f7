"""What the status page and the metrics are made of: what the DAGs already stored, as plain data.

The Airflow glue (``mirrorflow_airflow.ui.readers``) fills a :class:`StatusInputs`
from Variables, DAG runs and XComs; everything after that is pure, so the page,
its JSON API and the Prometheus exposition are built and tested without Airflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mirrorflow.topology import in_tree


@dataclass(frozen=True)
class RunInfo:
    """One DAG run of a mirrorflow DAG (the latest ones are read), with the result its main task stored."""

    dag_id: str
    run_id: str
    state: str
    started: datetime | None = None
    ended: datetime | None = None
    #: The return value (XCom) of the run's result task: a level run's copy summary, a sync's result.
    result: dict[str, Any] | None = None
    #: Where a person reads the details: the UI address of the task instance that holds them.
    log_url: str | None = None
    #: State of each task of the run, by task id.
    tasks: dict[str, str] = field(default_factory=dict)
    #: Where each task's log is in the UI, by task id.
    task_logs: dict[str, str] = field(default_factory=dict)

    @property
    def duration_s(self) -> float | None:
        if self.started is None:
            return None
        end = self.ended
        return None if end is None else max(0.0, (end - self.started).total_seconds())


@dataclass(frozen=True)
class DagInfo:
    """A mirrorflow DAG as the scheduler knows it: paused or not, when it runs next, its latest runs (newest first)."""

    dag_id: str
    paused: bool | None = None
    next_run: datetime | None = None
    runs: tuple[RunInfo, ...] = ()

    @property
    def last(self) -> RunInfo | None:
        return self.runs[0] if self.runs else None


@dataclass(frozen=True)
class RunningTask:
    """A task of a mirrorflow DAG running now (a backfill, an archive run, a big micro-batch...)."""

    dag_id: str
    run_id: str
    task_id: str
    started: datetime | None
    log_url: str | None = None
    #: The latest progress the task reported, when it reports any (``mirrorflow.progress``).
    progress: dict[str, Any] | None = None


@dataclass(frozen=True)
class StatusInputs:
    """Everything stored that the page shows; ``None`` where a DAG has not stored it yet."""

    now: datetime
    #: ``mirrorflow_lag_snapshot``: the latest ``mirror_lag_monitor`` measurement (docs/lag.md).
    lag: dict[str, Any] | None = None
    #: ``mirrorflow_audit_result``: the latest completeness audit summary (docs/audit.md).
    audit: dict[str, Any] | None = None
    #: ``mirrorflow_link_targets``: links switched by an operator.
    targets: dict[str, str] = field(default_factory=dict)
    #: ``mirrorflow_group_owners``: the cluster each consumer group runs on.
    owners: dict[str, str] = field(default_factory=dict)
    #: Running totals of the level runs per link-partition (:mod:`mirrorflow.status.totals`).
    totals: dict[str, Any] = field(default_factory=dict)
    #: Every mirrorflow DAG of the tree by its single-tree id (each :class:`DagInfo` holds its real id).
    dags: dict[str, DagInfo] = field(default_factory=dict)
    running: tuple[RunningTask, ...] = ()
    #: Where the UI is (``api.base_url``), for the links of the page and the alerts.
    base_url: str = ""
    #: The tree's namespace when one Airflow runs several; :attr:`dags` is keyed by the single-tree DAG id.
    tree: str = ""

    def dag_id(self, base: str) -> str:
        """The DAG id of this tree's ``base`` (``mirror_level_1`` is ``prod.mirror_level_1`` in tree ``prod``)."""
        return in_tree(self.tree, base)
