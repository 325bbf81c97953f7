"""What a ``dag.test()`` run left in the metadata database, read back for the DAG tests; and level DAGs to run.

:func:`xcom` (a task's return value), :func:`task_state`, :func:`states` (every
task's), :func:`asset_events` (an asset's events), :func:`task_output` (what the
run logged); :func:`run_until_quiescent` runs the level DAGs until nothing is
copied. :func:`one_way_pair` and :func:`level_1_dag` build a level-1 pair whose
reverse link is outside its window, so a run is about the one link a test watches.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mirrorflow.topology import parse_topology
from mirrorflow_airflow.factories.levels import build_level_dags


def xcom(dag_run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id=task_id, key="return_value")
            .one_or_none()
        )
        return None if row is None else XComModel.deserialize_value(row)


def asset_events(uri: str, dag_run=None, by_task: bool = False) -> list[tuple]:
    """The asset events of ``uri`` in the metadata database (of ``dag_run`` only, if given): (partition key, extra),
    and with ``by_task`` the emitting task's id last."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(AssetEvent).join(AssetModel, AssetModel.id == AssetEvent.asset_id).where(AssetModel.uri == uri)
    if dag_run is not None:
        query = query.where(AssetEvent.source_dag_id == dag_run.dag_id, AssetEvent.source_run_id == dag_run.run_id)
    with create_session() as session:
        return [(e.partition_key, dict(e.extra), *([e.source_task_id] if by_task else []))
                for e in session.scalars(query.order_by(AssetEvent.id))]


def task_state(dag_run, task_id: str) -> str | None:
    return next(ti.state for ti in dag_run.get_task_instances() if ti.task_id == task_id)



def run_until_quiescent(dags: dict, levels: list[int], max_rounds: int = 6) -> list[dict]:
    """dag.test() every level DAG, lowest level first, until a whole round copies nothing."""
    summaries = []
    for _ in range(max_rounds):
        copied = 0
        for level in levels:
            run = dags[f"mirror_level_{level}"].test()
            summary = xcom(run, "copy")
            assert run.state == "success", summary
            summaries.append(summary)
            copied += summary["copied"]
        if copied == 0:
            return summaries
    raise AssertionError(f"not quiescent after {max_rounds} rounds")


def task_output(caplog, capfd) -> str:
    """What dag.test() logged: stdlib records (task code) and the task runner's structlog output (failures)."""
    out, err = capfd.readouterr()
    return caplog.text + out + err


def states(run) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def closed_window() -> str:
    """A UTC replication window that is closed now (it opens in six hours)."""
    start = datetime.now(UTC) + timedelta(hours=6)
    return f"{start:%H:%M}-{start + timedelta(hours=1):%H:%M}"


def one_way_pair(source: str, target: str, target_name: str, topic: str, *, extra: str = "", defaults: str = "") -> str:
    """A level-1 pair, ``c1`` -> ``target_name``, whose reverse link is outside its window; ``defaults``: its links'."""
    return (f"clusters:\n  c1: {{bootstrap: '{source}'}}\n  {target_name}: {{bootstrap: '{target}'}}\n"
            f"tree: {{level: 1, children: [c1, {target_name}]}}\ntopics: ['{topic}']\n{extra}replication:\n"
            + (f"  defaults: {defaults}\n" if defaults else "")
            + f"  links:\n    {target_name}.L1: {{windows: ['{closed_window()}']}}\n")


def level_1_dag(topology_text: str):
    dag = build_level_dags(parse_topology(topology_text, source="test"))["mirror_level_1"]
    for t in dag.tasks:  # production retries; here one attempt shows the outcome
        t.retries = 0
    return dag
