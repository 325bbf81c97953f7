"""One DAG file, as a DAG folder outside this repository holds it, makes every DAG that ``dags/`` makes."""

from __future__ import annotations

import textwrap

import pytest
from airflow.dag_processing.dagbag import DagBag

from mirrorflow_airflow.factories import every
from mirrorflow_dev.install import PLUGINS_PROBE

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


def test_the_repository_layout_registers_the_plugin_once_through_its_entry_point_and_no_import_error(tmp_path):
    """This checkout is installed (editable) with the ``airflow.plugins`` entry point, and its plugins/ folder is
    Airflow's too: ``plugins/mirrorflow_status.py`` then offers nothing, or Airflow would meet the plugin twice."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__PLUGINS_FOLDER": str(repo / "plugins")}
    done = subprocess.run([sys.executable, "-c", PLUGINS_PROBE], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["names"].count("mirrorflow") == 1 and not found["errors"], found
