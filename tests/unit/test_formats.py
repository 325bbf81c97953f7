"""mirrorflow.formats: one wording for every kept format, and the checkpoint metadata's own check."""

from __future__ import annotations

import pickle

import pytest

from mirrorflow.copy.state.checkpoints import CheckpointMeta, carry_mark, checked, switch_mark
from mirrorflow.formats import FORMATS, NewerFormat, check, check_record


def test_a_reader_takes_its_own_format_and_older_ones_and_refuses_a_newer_one_by_name():
    assert check("audit", 1, "here") == 1
    assert check_record("acl-grants", {}, "here", missing=1) == 1  # written before formats were marked
    with pytest.raises(NewerFormat, match="acl-grants at topic t on c1 is format 2; this mirrorflow reads acl-grants "
                                          "up to format 1"):
        check_record("acl-grants", {"v": 2}, "topic t on c1")
    for odd in ("2", True, None, 1.5):  # never coerced: a version that is not an integer is not ours
        with pytest.raises(NewerFormat):
            check_record("audit", {"v": odd}, "here")


def test_the_refusal_crosses_from_a_spark_executor_intact():
    err = pickle.loads(pickle.dumps(NewerFormat("checkpoint", 3, "group g on c2, t[0]")))
    assert (err.name, err.found, err.where) == ("checkpoint", 3, "group g on c2, t[0]")
    assert "reads checkpoint up to format 1" in str(err)


def test_checkpoint_metadata_of_a_newer_format_or_an_unknown_mark_is_refused_and_everything_else_passes():
    for known in (CheckpointMeta("s", "t").encode(), switch_mark("c3"), carry_mark("c1.L2"), "", "app metadata"):
        assert checked(known, "g") == known
    with pytest.raises(NewerFormat, match="checkpoint at g is format 2"):
        checked("mirrorflow:v2;source=a", "g")
    with pytest.raises(NewerFormat, match="checkpoint at g is format 'paused'"):
        checked("mirrorflow:paused=yes", "g")


def test_every_format_is_at_a_version_and_says_where_it_lives():
    assert all(f.version >= 1 and f.where for f in FORMATS.values())
    assert set(FORMATS) == {"checkpoint", "positions", "audit", "topic-configs", "acl-grants", "archive",
                            "airflow-state"}


def test_a_migration_is_said_once_by_name_in_a_structured_line(caplog):
    from mirrorflow.formats import migrated

    with caplog.at_level("WARNING", logger="mirrorflow.formats"):
        migrated("audit", 0, "topic _mirrorflow.audit on c1", "the ledger's proven windows")
    [line] = [r.getMessage() for r in caplog.records]
    assert line == ('{"event":"format_migrated","state":"audit","from":0,"to":1,"where":"topic _mirrorflow.audit on '
                    'c1","what":"the ledger\'s proven windows"}')
