"""A stored status with something in every metrics family, for the status and the deploy tests.

:func:`full_inputs` is the state (lag snapshot, audit, copy totals, DAG runs) at
``NOW``; :func:`full_topology` its four-cluster topology. tests/unit/test_status_metrics.py
renders it line by line; tests/unit/test_metrics_deploy.py checks the alert rules and
the Grafana dashboard against what it renders.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mirrorflow.status.inputs import DagInfo, RunInfo, RunningTask, StatusInputs
from mirrorflow.status.totals import fold
from mirrorflow.topology import Topology, parse_topology

NOW = datetime(2026, 11, 22, 14, 5, 0, tzinfo=UTC)


FOUR = """
name: full
clusters:
  c1: {bootstrap: "127.0.0.1:19092"}
  c2: {bootstrap: "127.0.0.1:19093"}
  c3: {bootstrap: "127.0.0.1:19094"}
  c4: {bootstrap: "127.0.0.1:19095"}
tree:
  level: 3
  children:
    - {level: 1, children: [c1, c2]}
    - {level: 1, children: [c3, c4]}
topics: [orders]
replication:
  links:
    c1.L1: {windows: ["22:00-06:00 Europe/Amsterdam"]}
    c2.L1: {windows: ["Sun 12:00-18:00"]}
lag:
  schedule: 30s
  sla: {records: 1000, seconds: 600}
  links: {c1.L1: {records: 10}}
  groups:
    - {groups: "orders-.*", records: 5}
    - {groups: "billing", seconds: 60}
"""


def link_row(link: str, source: str, target: str, partition: int | None, records: int | None, seconds=None,
             *, topic: str = "orders", level: int = 1, **extra) -> dict:
    row = {"link_id": link, "level": level, "source": source, "target": target, "topic": topic,
           "partition": partition, "records": records, "seconds": seconds, "checkpoint": 10, "start": 10,
           "end": None if records is None else 10 + records, "oldest_timestamp": None, "gap": 0, "truncated": False,
           "checkpoint_missing": False, "note": None, "error": None}
    row.update(extra)
    return row


def group_row(cluster: str, group: str, topic: str, partition: int | None, records: int | None, seconds=None,
              **extra) -> dict:
    row = {"cluster": cluster, "group": group, "topic": topic, "partition": partition, "records": records,
           "seconds": seconds, "committed": 0, "end": records, "oldest_timestamp": None, "state": "stable",
           "members": 2, "note": None, "error": None}
    row.update(extra)
    return row


def copy_row(link: str, target: str, partition: int, copied: int, error: str | None = None) -> dict:
    return {"link_id": link, "source": link.split(".")[0], "target": target, "topic": "orders",
            "partition": partition, "copied": copied, "skipped": 0, "bytes": copied * 10, "error": error,
            "error_offset": None}


def full_topology() -> Topology:
    return parse_topology(FOUR, source="test")


def full_inputs() -> StatusInputs:
    """A stored state with something in every family."""
    lag = {
        "taken_at": (NOW - timedelta(seconds=45)).isoformat(), "topology": "full", "duration_s": 1.25, "ok": False,
        "links": [
            link_row("c1.L1", "c1", "c2", 0, 5, 3.5),
            link_row("c1.L1", "c1", "c2", 1, 0, 0.0),
            link_row("c2.L1", "c2", "c1", 0, 7, None, note="age not read"),
            link_row("c3.L1", "c3", "c4", 0, 0, 0.0, gap=6),
            link_row("c1.L3", "c1", "c4", 0, 0, 0.0, level=3, truncated=True),
            link_row("c2.L3", "c2", "c4", 0, 0, 0.0, level=3, checkpoint_missing=True),
            link_row("c4.L1", "c4", "c3", None, None, topic="*", error="cluster c4 is unreachable: _TRANSPORT"),
        ],
        "groups": [
            group_row("c1", "orders-app", "orders", 0, 4, 40.0),
            group_row("c1", "billing", "orders", 0, 0, 0.0, members=0, state="empty"),
            group_row("c2", "idle", "*", None, None, note="no committed offset"),
            group_row("c4", "*", "*", None, None, error="cluster c4 is unreachable"),
        ],
        "unreachable": {"c4": "_TRANSPORT: connection refused"},
        "violations": ["link c1.L1 (c1 -> c2) orders[0]: 5 records > 0", "link c3.L1 ...: retention gap"],
    }
    audit = {
        "checked_at": (NOW - timedelta(minutes=4)).isoformat(), "read": {"c1": 10, "c2": 9, "c4": 3},
        "unaudited": {"c2": 3}, "unreachable": {"c3": "timed out"}, "judged": 4, "complete": 2, "pending": 1,
        "before_horizon": 0, "verdicts_written": {},
        "differences": [
            {"topic": "orders", "window_ms": 1795356000000, "origin": "c1", "cluster": "c2", "expected": 10,
             "held": 9, "missing_count": 2, "duplicated_count": 1, "unexpected_count": 0, "missing": [[0, 3], [0, 4]],
             "duplicated": [[0, 7]], "unexpected": []},
            {"topic": "orders", "window_ms": 1795356600000, "origin": "c1", "cluster": "c4", "expected": 4,
             "held": 6},
        ],
    }
    totals = fold(None, [copy_row("c1.L1", "c2", 0, 100), copy_row("c1.L1", "c2", 1, 20),
                         copy_row("c3.L1", "c4", 0, 8)], finished_at=NOW.timestamp() - 600, run_id="r1")
    totals = fold(totals, [copy_row("c1.L1", "c2", 0, 5),
                           copy_row("c3.L1", "c4", 0, 0, "retention gap: offsets 10..15 (6) are no longer on c3")],
                  finished_at=NOW.timestamp() - 300, run_id="r2")
    level1 = DagInfo("mirror_level_1", paused=False, next_run=NOW + timedelta(minutes=5), runs=(
        RunInfo("mirror_level_1", "r3", "running", NOW - timedelta(seconds=20)),
        RunInfo("mirror_level_1", "r2", "failed", NOW - timedelta(seconds=400), NOW - timedelta(seconds=300),
                result={"level": 1, "ok": False, "copied": 5, "skipped": 2, "bytes": 50, "plan_s": 1.5,
                        "copy_s": 80.25, "errors": ["c3.L1 (c3 -> c4) orders[0]: retention gap"]}),
    ))
    level3 = DagInfo("mirror_level_3", paused=False, runs=(
        RunInfo("mirror_level_3", "r1", "success", NOW - timedelta(seconds=90), NOW - timedelta(seconds=60),
                result={"level": 3, "ok": True, "copied": 0, "skipped": 0, "bytes": 0, "plan_s": 0.5,
                        "copy_s": 1.0, "errors": []}),))
    monitor = DagInfo("mirror_lag_monitor", paused=False, runs=(
        RunInfo("mirror_lag_monitor", "m1", "failed", NOW - timedelta(seconds=50), NOW - timedelta(seconds=44)),))
    auditor = DagInfo("mirror_audit", paused=True)
    return StatusInputs(
        now=NOW, lag=lag, audit=audit, targets={"c1.L3": "c4"}, owners={"orders-app": "c1", "billing": "c2"},
        totals=totals,
        dags={d.dag_id: d for d in (level1, level3, monitor, auditor)},
        running=(RunningTask("mirror_level_1", "r3", "copy", NOW - timedelta(seconds=20)),),
        base_url="http://127.0.0.1:8080",
    )
