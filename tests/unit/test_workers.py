"""The suite's sharing between workers (tests/fixtures/workers.py): groups, and what stops when one ends."""

from __future__ import annotations

from types import SimpleNamespace

from tests.fixtures import workers


def _teardown(item: str, nextitem: str | None) -> None:
    hook = workers.pytest_runtest_teardown(SimpleNamespace(nodeid=item),  # type: ignore[arg-type]
                                           nextitem and SimpleNamespace(nodeid=nextitem))
    next(hook)  # the test's own fixtures would be torn down here
    for _ in hook:
        pass


def test_a_group_is_named_by_its_files_and_files_outside_a_group_are_their_own():
    assert workers.group_of("dags/test_secured_operations.py") == "secured"
    assert workers.group_of("integration/test_secured_login.py") == "secured"
    assert workers.group_of("e2e/standalone/test_failover_form.py") == "e2e"
    assert workers.group_of("dags/test_level_dags.py") == "dags/test_level_dags.py"


def test_what_a_group_holds_is_released_after_its_last_test_once(monkeypatch):
    monkeypatch.setattr(workers, "_at_group_end", {})
    released: list[str] = []
    workers.on_group_end("secured", lambda: released.append("secured brokers"))
    _teardown("tests/dags/test_secured_operations.py::test_a", "tests/dags/test_read_only.py::test_b")
    _teardown("tests/dags/test_read_only.py::test_b", "tests/integration/test_secured_login.py::test_c")
    assert released == []  # still inside the group: the next test is in it too
    _teardown("tests/integration/test_secured_login.py::test_c", "tests/integration/test_copy_group.py::test_d")
    assert released == ["secured brokers"]
    _teardown("tests/integration/test_copy_group.py::test_d", "tests/unit/test_layers.py::test_e")
    assert released == ["secured brokers"]


def test_files_go_out_by_kind_then_longest_recorded_group_first_and_an_unrecorded_file_leads_its_kind(
        tmp_path, monkeypatch):
    recorded = tmp_path / "durations.json"
    recorded.write_text('{"integration/test_a.py": 10, "integration/test_z.py": 90, "dags/test_read_only.py": 60,'
                        ' "integration/test_secured_login.py": 50, "unit/test_u.py": 1, "e2e/test_demo.py": 300}')
    monkeypatch.setattr(workers, "DURATIONS", recorded)
    paths = ["integration/test_a.py", "integration/test_new.py", "integration/test_z.py", "unit/test_u.py",
             "dags/test_read_only.py", "integration/test_secured_login.py", "e2e/test_demo.py"]
    place = workers._order(paths)
    assert sorted(paths, key=place.__getitem__) == [
        "e2e/test_demo.py", "dags/test_read_only.py", "integration/test_secured_login.py",  # the secured group: 110 s
        "integration/test_new.py", "integration/test_z.py", "integration/test_a.py", "unit/test_u.py"]
    monkeypatch.setattr(workers, "DURATIONS", tmp_path / "none.json")  # no record: the kinds' order alone
    place = workers._order(paths)
    assert [p for p in sorted(paths, key=place.__getitem__) if p.startswith("integration/test_")][-3:] == [
        "integration/test_a.py", "integration/test_new.py", "integration/test_z.py"]


def test_the_e2e_tests_on_the_session_clusters_run_after_those_that_bring_their_own():
    paths = ["e2e/standalone/test_failover_form.py", "e2e/test_demo.py", "e2e/standalone/test_a.py",
             "e2e/test_platform.py"]
    place = workers._order(paths)
    assert sorted(paths, key=place.__getitem__) == [
        "e2e/test_demo.py", "e2e/test_platform.py", "e2e/standalone/test_failover_form.py", "e2e/standalone/test_a.py"]
