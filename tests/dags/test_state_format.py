"""The format marker of mirrorflow's Airflow Variables: written with the first write, a newer one refused by name.

A DAG file's parse reads these Variables (the stored topology changes), so a
newer format stops the parse: the import error names the marker instead of a
tree built from state this code cannot read.
"""

from __future__ import annotations

import pytest

from mirrorflow.formats import NewerFormat
from mirrorflow_airflow import state

pytestmark = pytest.mark.airflow


@pytest.fixture
def marker(airflow_home, monkeypatch):
    """The marker Variable, read afresh by this process, and put back to this release's format afterwards."""
    from airflow.models import Variable

    monkeypatch.setattr(state, "_format_checked", False)
    Variable.delete(state.FORMAT_VARIABLE)
    yield Variable
    Variable.set(state.FORMAT_VARIABLE, "1")


def test_variables_without_a_marker_are_the_first_release_s_and_the_first_write_marks_them(marker):
    assert state.link_targets("") == {}  # no marker: the first release's format, read as it is
    assert marker.get(state.FORMAT_VARIABLE, default_var=None) is None  # a read writes nothing
    state.set_link_target("", "c9.L9", "c3", "c2")
    assert marker.get(state.FORMAT_VARIABLE) == "1"
    state.set_link_target("", "c9.L9", "c2", "c2")  # the default again: the entry is gone


def test_variables_a_newer_mirrorflow_keeps_are_refused_by_name_in_a_task_and_in_a_parse(marker, tmp_path):
    from airflow.dag_processing.dagbag import DagBag

    from tests.fixtures.standalone import REPO

    marker.set(state.FORMAT_VARIABLE, "2")
    with pytest.raises(NewerFormat, match="airflow-state at Airflow Variable mirrorflow_state_format is format 2; "
                                          "this mirrorflow reads airflow-state up to format 1"):
        state.link_targets("")
    with pytest.raises(NewerFormat):
        state.set_link_target("", "c9.L9", "c3", "c2")  # and writes nothing
    assert marker.get(state.FORMAT_VARIABLE) == "2"
    state._format_checked = False
    bag = DagBag(dag_folder=str(REPO / "dags" / "mirror_levels.py"))
    [error] = bag.import_errors.values()
    assert "mirrorflow_state_format is format 2" in error, error
