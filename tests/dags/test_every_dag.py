"""One DAG file, as a DAG folder outside this repository holds it, makes every DAG that ``dags/`` makes."""

from __future__ import annotations

import textwrap

import pytest
from airflow.dag_processing.dagbag import DagBag

from mirrorflow_airflow.factories import every

pytestmark = pytest.mark.airflow


def documented_file() -> str:
    """The DAG file exactly as the module's docstring shows it (the code block after ``::``)."""
    block = every.__doc__.split("::\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines)).strip() + "\n"


def test_the_one_documented_dag_file_makes_every_dag_of_the_dags_folder_with_the_same_tasks_and_forms(
        dagbag, tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "mirrorflow.py").write_text(documented_file())
    one = DagBag(dag_folder=str(folder))
    assert one.import_errors == {}, one.import_errors
    assert sorted(one.dag_ids) == sorted(dagbag.dag_ids)
    for dag_id in dagbag.dag_ids:
        ours, theirs = one.get_dag(dag_id), dagbag.get_dag(dag_id)
        assert sorted(ours.task_ids) == sorted(theirs.task_ids), dag_id
        assert set(ours.params) == set(theirs.params), dag_id
        assert ours.tags == theirs.tags, dag_id
        assert type(ours.timetable) is type(theirs.timetable), dag_id
