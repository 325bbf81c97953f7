"""The Prometheus exposition of mirrorflow.status.metrics: exact lines, escaping, naming, no duplicates.

:func:`full_inputs` holds a stored state that exercises every family of
``FAMILIES`` (tests/unit/test_metrics_deploy.py checks the alert rules and the
Grafana dashboard against its output).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from mirrorflow.status import metrics
from mirrorflow.status.inputs import DagInfo, RunInfo, RunningTask, StatusInputs
from mirrorflow.status.metrics import FAMILIES, REASON_NAMES, escape_label, failure_reason, format_value, render
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


# --------------------------------------------------------------------------- a small parser of the text format

SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')
LABEL = re.compile(r'(?P<name>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\\n]|\\[\\"n])*)"(?:,|$)')


def unescape(value: str) -> str:
    return re.sub(r"\\([\\\"n])", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def parse(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, dict[str, str], str]]]:
    """``({family: {"help": ..., "type": ...}}, [(name, labels, value), ...])``, strictly: a bad line fails."""
    assert text.endswith("\n")
    families: dict[str, dict[str, str]] = {}
    samples: list[tuple[str, dict[str, str], str]] = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, f"second HELP for {name}"
            families[name] = {"help": help_text}
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert set(families.get(name, {})) == {"help"}, f"TYPE of {name} without its HELP just before"
            families[name]["type"] = kind
        else:
            m = SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            labels: dict[str, str] = {}
            rest = m.group("labels") or ""
            while rest:
                lm = LABEL.match(rest)
                assert lm, f"bad labels in {line!r} at {rest!r}"
                assert lm.group("name") not in labels
                labels[lm.group("name")] = unescape(lm.group("value"))
                rest = rest[lm.end():]
            assert m.group("name") in families and "type" in families[m.group("name")], f"{line!r} before its TYPE"
            float(m.group("value").replace("+Inf", "inf"))
            samples.append((m.group("name"), labels, m.group("value")))
    return families, samples


# --------------------------------------------------------------------------- tests


def test_a_small_input_renders_exactly_these_lines():
    topology = parse_topology("""
clusters:
  c1: {bootstrap: "127.0.0.1:19092"}
  c2: {bootstrap: "127.0.0.1:19093"}
tree: {level: 1, children: [c1, c2]}
topics: [orders]
lag: {schedule: manual, links: {c1.L1: {records: 10}}}
""")
    lag = {"taken_at": "2026-11-22T14:04:00+00:00", "duration_s": 0.5, "violations": [],
           "links": [link_row("c1.L1", "c1", "c2", 0, 5, 2.5)], "groups": [], "unreachable": {}}
    text = render(topology, StatusInputs(now=NOW, lag=lag))
    help_of = {f.name: f.help for f in FAMILIES}
    part = 'link="c1.L1",source="c1",target="c2",topic="orders",partition="0"'
    expected = []
    for name, kind, lines in [
        ("mirrorflow_link_info", "gauge",
         ['mirrorflow_link_info{link="c1.L1",level="1",source="c1",target="c2",default_target="c2"} 1',
          'mirrorflow_link_info{link="c2.L1",level="1",source="c2",target="c1",default_target="c1"} 1']),
        ("mirrorflow_link_sla_records", "gauge", ['mirrorflow_link_sla_records{link="c1.L1"} 10']),
        ("mirrorflow_link_lag_records", "gauge", [f"mirrorflow_link_lag_records{{{part}}} 5"]),
        ("mirrorflow_link_lag_seconds", "gauge", [f"mirrorflow_link_lag_seconds{{{part}}} 2.5"]),
        ("mirrorflow_link_retention_gap_records", "gauge", [f"mirrorflow_link_retention_gap_records{{{part}}} 0"]),
        ("mirrorflow_link_open_transaction_seconds", "gauge",
         [f"mirrorflow_link_open_transaction_seconds{{{part}}} 0"]),
        ("mirrorflow_link_source_truncated", "gauge", [f"mirrorflow_link_source_truncated{{{part}}} 0"]),
        ("mirrorflow_link_checkpoint_missing", "gauge", [f"mirrorflow_link_checkpoint_missing{{{part}}} 0"]),
        ("mirrorflow_link_lag_measured", "gauge",
         ['mirrorflow_link_lag_measured{link="c1.L1",source="c1",target="c2"} 1']),
        ("mirrorflow_group_lag_measured", "gauge",
         ['mirrorflow_group_lag_measured{cluster="c1"} 1', 'mirrorflow_group_lag_measured{cluster="c2"} 1']),
        ("mirrorflow_cluster_reachable", "gauge",
         ['mirrorflow_cluster_reachable{cluster="c1"} 1', 'mirrorflow_cluster_reachable{cluster="c2"} 1']),
        ("mirrorflow_lag_snapshot_timestamp_seconds", "gauge",
         ["mirrorflow_lag_snapshot_timestamp_seconds 1795356240"]),
        ("mirrorflow_lag_snapshot_age_seconds", "gauge", ["mirrorflow_lag_snapshot_age_seconds 60"]),
        ("mirrorflow_lag_snapshot_duration_seconds", "gauge", ["mirrorflow_lag_snapshot_duration_seconds 0.5"]),
        ("mirrorflow_lag_violations", "gauge", ["mirrorflow_lag_violations 0"]),
    ]:
        expected += [f"# HELP {name} {help_of[name]}", f"# TYPE {name} {kind}", *lines]
    assert text.splitlines() == expected


def test_nothing_stored_yet_renders_only_what_the_topology_says():
    text = render(full_topology(), StatusInputs(now=NOW))
    families, samples = parse(text)
    assert set(families) == {"mirrorflow_link_info", "mirrorflow_link_sla_records", "mirrorflow_link_sla_seconds",
                             "mirrorflow_link_window_open", "mirrorflow_link_window_next_open_timestamp_seconds",
                             "mirrorflow_lag_schedule_interval_seconds"}
    assert ("mirrorflow_lag_schedule_interval_seconds", {}, "30") in samples
    bounds = {(name, labels["link"]): float(v) for name, labels, v in samples if "_sla_" in name}
    assert bounds[("mirrorflow_link_sla_records", "c1.L1")] == 10  # lag.links overrides the sla key by key
    assert bounds[("mirrorflow_link_sla_seconds", "c1.L1")] == 600
    assert bounds[("mirrorflow_link_sla_records", "c2.L3")] == 1000
    unbounded = parse_topology(FOUR[:FOUR.index("lag:")], source="test")  # no lag section: no bound, no series
    assert "_sla_" not in render(unbounded, StatusInputs(now=NOW))


def test_every_family_of_the_full_input_has_help_and_type_and_every_declared_family_shows():
    families, samples = parse(render(full_topology(), full_inputs()))
    declared = {f.name: f for f in FAMILIES}
    assert set(families) == set(declared), set(declared) ^ set(families)
    for name, family in families.items():
        assert family["type"] == declared[name].kind and family["help"], name
    for name, labels, _ in samples:
        assert set(labels) <= set(declared[name].labels), (name, labels)


def test_no_series_twice_and_no_error_text_in_any_label():
    text = render(full_topology(), full_inputs())
    _, samples = parse(text)
    keys = [(name, tuple(sorted(labels.items()))) for name, labels, _ in samples]
    assert len(keys) == len(set(keys))
    assert "_TRANSPORT" not in text and "no longer on" not in text and "timed out" not in text


def test_metric_and_label_names_follow_the_prometheus_conventions():
    units = re.compile(r"_(ms|msec|sec|secs|min|mins|minutes|hours|days|kb|mb|gb|milliseconds|microseconds)(_|$)")
    for family in FAMILIES:
        assert re.fullmatch(r"mirrorflow_[a-z][a-z0-9_]*[a-z0-9]", family.name), family.name
        assert "__" not in family.name and not units.search(family.name), family.name
        assert family.kind in {"gauge", "counter"}
        assert family.name.endswith("_total") == (family.kind == "counter"), family.name
        if "seconds" in family.name or "timestamp" in family.name:
            assert family.name.endswith("_seconds"), family.name
        assert not family.name.endswith(("_count", "_sum", "_bucket")), family.name  # reserved for histograms
        for label in family.labels:
            assert re.fullmatch(r"[a-z][a-z0-9_]*", label) and not label.startswith("__"), (family.name, label)
            assert label not in {"job", "instance", "le", "quantile"}, (family.name, label)  # Prometheus' own
        assert len(set(family.labels)) == len(family.labels)


def test_label_values_are_escaped_and_read_back_as_they_were():
    odd = 'we"ird\\topic\nnext'
    assert escape_label(odd) == 'we\\"ird\\\\topic\\nnext'
    lag = {"taken_at": NOW.isoformat(), "links": [link_row("c1.L1", "c1", "c2", 0, 1, 1.0, topic=odd)],
           "groups": [group_row("c1", 'g"1', odd, 0, 3, 2.0)], "unreachable": {}, "violations": []}
    text = render(full_topology(), StatusInputs(now=NOW, lag=lag))
    assert f'topic="{escape_label(odd)}"' in text
    _, samples = parse(text)
    lagging = [labels for name, labels, _ in samples if name == "mirrorflow_link_lag_records"]
    assert lagging == [{"link": "c1.L1", "source": "c1", "target": "c2", "topic": odd, "partition": "0"}]
    groups = [labels for name, labels, _ in samples if name == "mirrorflow_group_lag_records"]
    assert groups == [{"group": 'g"1', "cluster": "c1", "topic": odd, "partition": "0"}]
    assert all("\n" not in line[:-1] for line in text.splitlines(keepends=True))


def test_values_are_written_as_prometheus_reads_them():
    assert [format_value(v) for v in (3, 2.0, 0.25, True, float("nan"), float("inf"), -float("inf"), 1e20)] == [
        "3", "2", "0.25", "1", "NaN", "+Inf", "-Inf", "1e+20"]


def test_the_full_input_says_what_each_source_holds():
    _, samples = parse(render(full_topology(), full_inputs()))

    def value(name: str, **labels: str) -> float:
        found = [float(v) for n, lab, v in samples if n == name and all(lab.get(k) == x for k, x in labels.items())]
        assert len(found) == 1, (name, labels, found)
        return found[0]

    def absent(name: str, **labels: str) -> bool:
        return not [1 for n, lab, _ in samples if n == name and all(lab.get(k) == x for k, x in labels.items())]

    # replication windows at NOW (Sunday 14:05 UTC): c1.L1's opens at 22:00 in Amsterdam, c2.L1's is open
    assert value("mirrorflow_link_window_open", link="c1.L1") == 0
    assert value("mirrorflow_link_window_next_open_timestamp_seconds", link="c1.L1") == datetime(
        2026, 11, 22, 21, 0, tzinfo=UTC).timestamp()
    assert value("mirrorflow_link_window_open", link="c2.L1") == 1
    assert absent("mirrorflow_link_window_next_open_timestamp_seconds", link="c2.L1")
    assert absent("mirrorflow_link_window_open", link="c3.L1")  # no windows: always open, nothing to say
    # lag snapshot
    assert value("mirrorflow_link_lag_records", link="c1.L1", partition="0") == 5
    assert value("mirrorflow_link_lag_records", link="c2.L1", partition="0") == 7
    assert absent("mirrorflow_link_lag_seconds", link="c2.L1")  # the age could not be read
    assert value("mirrorflow_link_retention_gap_records", link="c3.L1") == 6
    assert value("mirrorflow_link_source_truncated", link="c1.L3") == 1
    assert value("mirrorflow_link_checkpoint_missing", link="c2.L3") == 1
    assert value("mirrorflow_link_lag_measured", link="c4.L1") == 0
    assert value("mirrorflow_link_lag_measured", link="c1.L1") == 1
    assert absent("mirrorflow_link_lag_records", link="c4.L1")
    assert value("mirrorflow_cluster_reachable", cluster="c4") == 0
    assert value("mirrorflow_cluster_reachable", cluster="c1") == 1
    assert value("mirrorflow_group_lag_measured", cluster="c4") == 0
    assert value("mirrorflow_group_lag_records", group="orders-app", cluster="c1") == 4
    assert value("mirrorflow_group_lag_seconds", group="orders-app", cluster="c1") == 40
    assert absent("mirrorflow_group_lag_records", group="idle") and absent("mirrorflow_group_lag_records", group="*")
    assert value("mirrorflow_group_sla_records", group="orders-app") == 5
    assert value("mirrorflow_group_sla_seconds", group="billing") == 60
    assert absent("mirrorflow_group_sla_records", group="billing") and absent("mirrorflow_group_sla_records",
                                                                              group="idle")
    assert value("mirrorflow_group_owner_info", group="billing") == 1
    assert value("mirrorflow_lag_snapshot_age_seconds") == 45
    assert value("mirrorflow_lag_violations") == 2
    assert value("mirrorflow_link_info", link="c1.L3") == 1
    assert value("mirrorflow_link_info", link="c1.L3", target="c4", default_target="c3") == 1
    # totals
    assert value("mirrorflow_link_copied_records_total", link="c1.L1", partition="0") == 105
    assert value("mirrorflow_link_copied_bytes_total", link="c1.L1", partition="0") == 1050
    assert value("mirrorflow_link_last_success_timestamp_seconds", link="c1.L1", partition="0") == NOW.timestamp() - 300
    assert value("mirrorflow_link_last_success_timestamp_seconds", link="c1.L1", partition="1") == NOW.timestamp() - 600
    assert value("mirrorflow_link_partition_failed", link="c3.L1", reason="retention_gap") == 1
    assert value("mirrorflow_link_partition_failed", link="c1.L1", partition="0") == 0
    assert value("mirrorflow_link_partition_failed_since_timestamp_seconds", link="c3.L1") == NOW.timestamp() - 300
    assert absent("mirrorflow_link_partition_failed_since_timestamp_seconds", link="c1.L1")
    # audit
    cell = dict(topic="orders", window="2026-11-22T14:00:00Z", origin="c1", cluster="c2")
    assert value("mirrorflow_audit_missing_messages", **cell) == 2
    assert value("mirrorflow_audit_duplicated_messages", **cell) == 1
    assert value("mirrorflow_audit_unexpected_messages", **cell) == 0
    undrilled = dict(topic="orders", window="2026-11-22T14:10:00Z", origin="c1", cluster="c4")
    assert value("mirrorflow_audit_missing_messages", **undrilled) == 0
    assert value("mirrorflow_audit_duplicated_messages", **undrilled) == 2
    assert absent("mirrorflow_audit_unexpected_messages", **undrilled)
    assert value("mirrorflow_audit_differences") == 2
    assert value("mirrorflow_audit_cluster_audited", cluster="c3") == 0
    assert value("mirrorflow_audit_unaudited_messages", cluster="c2") == 3
    assert value("mirrorflow_audit_age_seconds") == 240
    # runs
    assert value("mirrorflow_dag_run_duration_seconds", dag_id="mirror_level_1", state="failed") == 100
    assert absent("mirrorflow_dag_run_duration_seconds", state="running")
    assert value("mirrorflow_dag_run_duration_seconds", dag_id="mirror_lag_monitor") == 6
    assert value("mirrorflow_dag_paused", dag_id="mirror_audit") == 1
    assert value("mirrorflow_dag_running_tasks", dag_id="mirror_level_1") == 1
    assert value("mirrorflow_dag_running_tasks", dag_id="mirror_level_3") == 0
    assert value("mirrorflow_level_run_copied_records", level="1") == 5
    assert value("mirrorflow_level_run_errors", level="1") == 1
    assert value("mirrorflow_level_run_copy_seconds", level="1") == 80.25
    assert value("mirrorflow_level_run_end_timestamp_seconds", level="1") == NOW.timestamp() - 300
    assert value("mirrorflow_level_run_copied_records", level="3") == 0


@pytest.mark.parametrize("error, reason", [
    ("retention gap: offsets 10..15 (6) are no longer on c1 and the link had not copied them", "retention_gap"),
    ("truncated source: c1 orders[0] offset 41, the last record link c1.L1 read before its checkpoint",
     "truncated_source"),
    ("c1.L1: the checkpoint was lost (committed offsets expired, or the link's id changed)", "checkpoint_lost"),
    ("TOPIC_AUTHORIZATION_FAILED: Not authorized to access topics", "not_authorized"),
    ("not attempted: cluster c2 is unreachable (_TRANSPORT)", "unreachable"),
    ("KafkaException: _FENCED: producer fenced by a newer instance", "fenced"),
    ("MSG_SIZE_TOO_LARGE: (producing the copy of source offset 7)", "refused_message"),
    ("something nobody foresaw", "other"),
    (None, "other"),
])
def test_failure_reasons_are_a_short_fixed_set(error, reason):
    assert failure_reason(error) == reason
    assert reason in REASON_NAMES


def test_a_family_refuses_labels_it_does_not_declare():
    out = metrics.Exposition()
    with pytest.raises(ValueError, match="mirrorflow_cluster_reachable"):
        out.add("mirrorflow_cluster_reachable", 1, cluster="c1", extra="x")
    out.add("mirrorflow_cluster_reachable", 1, cluster="c1")
    out.add("mirrorflow_cluster_reachable", 0, cluster="c1")  # the same series again: the first stays
    assert out.text().splitlines()[-1] == 'mirrorflow_cluster_reachable{cluster="c1"} 1'
