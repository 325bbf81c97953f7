"""The Prometheus exposition of mirrorflow.status.metrics: exact lines, escaping, naming, no duplicates.

:func:`tests.unit.status_state.full_inputs` holds a stored state that exercises
every family of ``FAMILIES`` (tests/unit/test_metrics_deploy.py checks the alert
rules and the Grafana dashboard against its output); :func:`tests.unit.exposition.parse`
reads the text format strictly.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from mirrorflow.status import metrics
from mirrorflow.status.inputs import StatusInputs
from mirrorflow.status.metrics import FAMILIES, REASON_NAMES, escape_label, failure_reason, format_value, render
from mirrorflow.topology import parse_topology
from tests.unit.exposition import parse
from tests.unit.status_state import FOUR, NOW, full_inputs, full_topology, group_row, link_row


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
