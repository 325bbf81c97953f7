"""The lag package without brokers: rows in words, the snapshot's JSON format, the tables, and what it imports.

The snapshot dict is what ``mirror_lag_monitor`` stores and other tasks and the
UI read (docs/lag.md, "Snapshot format"), so its keys and sums are pinned here on
hand-made rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

from mirrorflow.lag import WHOLE, GroupPartitionLag, LagSnapshot, LinkPartitionLag, Violation, group_table, link_table
from mirrorflow.lag.ages import epoch_ms
from mirrorflow.lag.rows import join_notes

LINK_KEYS = ["link_id", "level", "source", "target", "topic", "partition", "records", "seconds", "checkpoint", "start",
             "end", "high", "held", "open_transaction_s", "oldest_timestamp", "gap", "truncated", "checkpoint_missing",
             "note", "error"]
GROUP_KEYS = ["cluster", "group", "topic", "partition", "records", "seconds", "committed", "end", "oldest_timestamp",
              "state", "members", "note", "error"]


def link_rows() -> list[LinkPartitionLag]:
    return [
        LinkPartitionLag("c1.L1", 1, "c1", "c2", "orders", 0, 5, 3602.6, None, 0, 5, 1795348762622),
        LinkPartitionLag("c1.L1", 1, "c1", "c2", "orders", 1, 0, 0.0, 7, 7, 7),
        LinkPartitionLag("c1.L1", 1, "c1", "c2", "orders", 2, None, error="source offsets not read: X: y"),
        LinkPartitionLag("c1.L3", 1, "c1", "c3", WHOLE, None, None, error="not measured: cluster c3 is unreachable"),
        LinkPartitionLag("c2.L1", 1, "c2", "c1", "orders", 0, 3, None, 2, 2, 5, note="age not read"),
    ]


def group_rows() -> list[GroupPartitionLag]:
    return [
        GroupPartitionLag("c1", "orders-app", "orders", 0, 4, 40.0, 96, 100, 1795352602000, "stable", 2),
        GroupPartitionLag("c1", "idle", WHOLE, None, None, state="empty", members=0,
                          note="no committed offset on the measured topics"),
        GroupPartitionLag("c1", "bad", WHOLE, None, None, error="committed offsets not read: boom"),
        GroupPartitionLag("c3", WHOLE, WHOLE, None, None, error="consumer groups not measured: cluster c3 down"),
    ]


def snapshot() -> LagSnapshot:
    links = link_rows()
    return LagSnapshot(datetime(2026, 11, 22, 14, 4, 3, tzinfo=UTC), "demo", links, group_rows(),
                       {"c3": "is unreachable at 127.0.0.1:1"},
                       [Violation("link", links[0].where, f"{links[0].where}: 5 records > 0")],
                       {"sla": {"records": 0}}, 1.23456)


def test_rows_name_their_place_for_an_operator():
    assert [r.where for r in link_rows()][::2] == [
        "link c1.L1 (c1 -> c2) orders[0]", "link c1.L1 (c1 -> c2) orders[2]", "link c2.L1 (c2 -> c1) orders[0]"]
    assert link_rows()[3].where == "link c1.L3 (c1 -> c3)"
    assert [r.where for r in group_rows()] == [
        "group orders-app on c1 orders[0]", "group idle on c1", "group bad on c1", "cluster c3"]


def test_notes_join_in_order():
    assert join_notes(None, "a") == "a"
    assert join_notes("", "a") == "a"
    assert join_notes("a", "b") == "a; b"


def test_a_naive_now_is_utc_in_milliseconds():
    assert epoch_ms(datetime(2026, 11, 22, 14, 4, 3)) == epoch_ms(datetime(2026, 11, 22, 14, 4, 3, tzinfo=UTC))
    assert epoch_ms(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)) == 1000


def test_the_snapshot_dict_keeps_its_format():
    data = json.loads(json.dumps(snapshot().to_dict()))  # JSON-able as it is
    assert list(data) == ["taken_at", "topology", "duration_s", "ok", "totals", "per_link", "per_group", "links",
                          "groups", "unreachable", "sla", "violations", "waiting", "failover"]
    assert data["taken_at"] == "2026-11-22T14:04:03+00:00"
    assert (data["topology"], data["duration_s"], data["ok"]) == ("demo", 1.235, False)
    assert data["totals"] == {
        "links": 3, "link_partitions": 3, "lagging_link_partitions": 2, "link_records": 8, "link_max_seconds": 3602.6,
        "groups": 3, "group_partitions": 1, "group_records": 4, "group_max_seconds": 40.0, "errors": 4,
        "unreachable": ["c3"], "violations": 1,
    }
    assert data["per_link"]["c1.L1"] == {"level": 1, "source": "c1", "target": "c2", "partitions": 2, "records": 5,
                                         "max_seconds": 3602.6, "errors": ["orders[2]: source offsets not read: X: y"]}
    assert data["per_link"]["c1.L3"]["errors"] == ["not measured: cluster c3 is unreachable"]
    assert data["per_group"]["c1/orders-app"] == {"cluster": "c1", "group": "orders-app", "state": "stable",
                                                  "members": 2, "partitions": 1, "records": 4, "max_seconds": 40.0,
                                                  "errors": []}
    assert sorted(data["per_group"]) == ["c1/bad", "c1/idle", "c1/orders-app"]  # the cluster row is not a group
    assert [list(r) for r in data["links"]] == [LINK_KEYS] * 5
    assert [list(r) for r in data["groups"]] == [GROUP_KEYS] * 4
    assert data["unreachable"] == {"c3": "is unreachable at 127.0.0.1:1"}
    assert data["sla"] == {"sla": {"records": 0}}
    assert data["violations"] == ["link c1.L1 (c1 -> c2) orders[0]: 5 records > 0"]


def test_tables_show_lagging_rows_and_say_how_many_were_left_out():
    assert link_table(link_rows(), only_lagging=True, limit=2).splitlines() == [
        "link   source  target  topic   part  records  seconds  checkpoint  end  note",
        "c1.L1  c1      c2      orders  0     5        3602.6   -           5",
        "c1.L1  c1      c2      orders  2     -        ?        -           -    source offsets not read: X: y",
        "... 2 more rows",
    ]
    assert group_table(group_rows(), only_lagging=True).splitlines() == [
        "cluster  group       state   members  topic   part  records  seconds  committed  end  note",
        "c1       orders-app  stable  2        orders  0     4        40.0     96         100",
        "c1       bad         -       -        *             -        ?        -          -    "
        "committed offsets not read: boom",
        "c3       *           -       -        *             -        ?        -          -    "
        "consumer groups not measured: cluster c3 down",
    ]
    assert len(link_table(link_rows()).splitlines()) == 6
    assert link_table([]) == group_table([]) == "(no rows)"


def test_the_package_imports_neither_spark_nor_the_copy_driver():
    code = ("import sys, mirrorflow.lag; print(sorted(m for m in sys.modules if m.startswith(("
            "'pyspark', 'airflow', 'mirrorflow.copy.job', 'mirrorflow.copy.engine'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_retention_gap_and_a_truncation_violate_whatever_the_bounds():
    from mirrorflow.lag import LinkPartitionLag, link_violations

    gap = LinkPartitionLag("c1.L1", 1, "c1", "c2", "orders", 0, records=10, seconds=1.0, checkpoint=100, start=150,
                           end=160, gap=50)
    cut = LinkPartitionLag("c1.L1", 1, "c1", "c2", "orders", 1, records=0, seconds=0.0, checkpoint=90, start=90,
                           end=40, truncated=True)
    fine = LinkPartitionLag("c1.L1", 1, "c1", "c2", "orders", 2, records=0, seconds=0.0, checkpoint=5, start=5, end=5)
    assert [str(v) for v in link_violations([gap, cut, fine], lambda _link: None)] == [
        "link c1.L1 (c1 -> c2) orders[0]: retention gap: offsets 100..149 (50) were deleted on c1 before the link "
        "copied them",
        "link c1.L1 (c1 -> c2) orders[1]: the checkpoint 90 is past the source's end 40: the source partition was "
        "truncated or recreated",
    ]
