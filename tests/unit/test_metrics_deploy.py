"""What deploy/ ships for Prometheus and Grafana, held against the metrics mirrorflow renders.

- the alert rules pass ``promtool check rules`` and their unit tests (``promtool test rules``
  with tests/unit/prometheus/rules_test.yaml), which show the lag and failed-partition alerts
  both firing and not firing;
- every metric name the rules and the dashboard's queries use is one ``render`` produces for a
  full input, and every label they name is one of mirrorflow's (or Prometheus' job/instance);
- the dashboard's queries are valid PromQL (``promtool`` parses each as a recording rule);
- every alert says what, where and what to do, with a runbook section that exists in docs/metrics.md;
- ``promtool check metrics`` (its lint) finds nothing in the full rendering.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from mirrorflow.status.metrics import FAMILIES, render
from tests.fixtures.prometheus import run_promtool
from tests.unit.exposition import parse
from tests.unit.status_state import full_inputs, full_topology

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "mirrorflow-rules.yaml"
RULES_TEST = REPO / "tests" / "unit" / "prometheus" / "rules_test.yaml"
DASHBOARD = REPO / "deploy" / "grafana" / "mirrorflow-dashboard.json"
DOC = REPO / "docs" / "metrics.md"
NAME = re.compile(r"\bmirrorflow_[a-z_]+")
#: Labels Prometheus adds at scrape time, and Grafana's own variables.
SCRAPE_LABELS = {"job", "instance"}


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def dashboard_exprs() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dash["panels"] for target in panel.get("targets", [])]


def rendered_names() -> set[str]:
    _, samples = parse(render(full_topology(), full_inputs()))
    return {name for name, _, _ in samples}


def labels_named(expr: str) -> set[str]:
    """Label names an expression groups, matches or selects by."""
    names: set[str] = set()
    for group in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
        names |= {n.strip() for n in group.split(",") if n.strip()}
    for selector in re.findall(r"\{([^}]*)\}", expr):
        if "$__" in selector:
            continue
        names |= set(re.findall(r"([a-z_]+)\s*(?:=~|!~|!=|=)", selector))
    return names


def test_the_rules_are_valid_for_promtool(promtool):
    checked = run_promtool("check", "rules", str(RULES))
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout + checked.stderr


def test_the_rules_unit_tests_pass(promtool):
    tested = run_promtool("test", "rules", RULES_TEST.name, cwd=RULES_TEST.parent)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_the_rules_tests_show_the_lag_and_failure_alerts_firing_and_not_firing():
    cases = [case for test in yaml.safe_load(RULES_TEST.read_text())["tests"] for case in test["alert_rule_test"]]
    for alert in ("MirrorflowLinkLagRecordsOverSla", "MirrorflowLinkLagSecondsOverSla", "MirrorflowPartitionFailed",
                  "MirrorflowRetentionGap", "MirrorflowGroupLagRecordsOverSla", "MirrorflowLagSnapshotStale",
                  "MirrorflowAuditMissingMessages"):
        outcomes = {bool(c["exp_alerts"]) for c in cases if c["alertname"] == alert}
        assert outcomes == {True, False}, f"{alert}: the rules test must show it firing and not firing"
    tested = {c["alertname"] for c in cases}
    assert tested <= {r["alert"] for r in rules()}


def test_the_rules_cover_every_condition_the_lag_monitor_checks():
    alerts = {r["alert"]: r["expr"] for r in rules()}
    wanted = {
        "MirrorflowLinkLagRecordsOverSla": "mirrorflow_link_sla_records",
        "MirrorflowLinkLagSecondsOverSla": "mirrorflow_link_sla_seconds",
        "MirrorflowLinkNotMeasured": "mirrorflow_link_lag_measured",
        "MirrorflowRetentionGap": "mirrorflow_link_retention_gap_records",
        "MirrorflowSourceTruncated": "mirrorflow_link_source_truncated",
        "MirrorflowCheckpointMissing": "mirrorflow_link_checkpoint_missing",
        "MirrorflowClusterUnreachable": "mirrorflow_cluster_reachable",
        "MirrorflowGroupLagRecordsOverSla": "mirrorflow_group_sla_records",
        "MirrorflowGroupLagSecondsOverSla": "mirrorflow_group_sla_seconds",
        "MirrorflowAuditMissingMessages": "mirrorflow_audit_missing_messages",
        "MirrorflowAuditDuplicatedMessages": "mirrorflow_audit_duplicated_messages",
        "MirrorflowPartitionFailed": "mirrorflow_link_partition_failed",
        "MirrorflowLagSnapshotStale": "mirrorflow_lag_snapshot_age_seconds",
    }
    for alert, metric in wanted.items():
        assert alert in alerts and metric in alerts[alert], alert


def test_every_alert_says_what_where_and_what_to_do_with_a_runbook_section_in_the_docs():
    doc = DOC.read_text()
    anchors = {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", doc, flags=re.M)}
    for rule in rules():
        notes = rule["annotations"]
        assert notes.get("summary") and len(notes.get("description", "")) > 60, rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        page, _, anchor = notes["runbook"].partition("#")
        assert page == "docs/metrics.md" and anchor in anchors, f"{rule['alert']}: {notes['runbook']} not in docs"


def test_rules_and_dashboard_use_only_metrics_and_labels_that_render_produces():
    produced = rendered_names()
    known_labels = {label for family in FAMILIES for label in family.labels} | SCRAPE_LABELS
    used = [(f"rule {r['alert']}", r["expr"]) for r in rules()] + [(f"panel {t}", e) for t, e in dashboard_exprs()]
    assert len(used) > 30
    wrong = []
    for where, expr in used:
        names = NAME.findall(expr)
        assert names, f"{where}: no mirrorflow metric in {expr!r}"
        wrong += [f"{where}: {n} is not rendered" for n in names if n not in produced]
        wrong += [f"{where}: label {label} is not mirrorflow's" for label in labels_named(expr) - known_labels]
    assert not wrong, "\n".join(wrong)


def test_the_dashboard_is_importable_and_has_the_panels_it_promises(tmp_path, promtool):
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "mirrorflow" and dash["schemaVersion"] >= 36
    assert [v["type"] for v in dash["templating"]["list"]] == ["datasource"]
    panels = dash["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["title"] and {"x", "y", "w", "h"} <= set(panel["gridPos"]), panel
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
    titles = " | ".join(p["title"].lower() for p in panels)
    for subject in ("link lag (records)", "link lag (seconds)", "copied records", "failed partitions", "group lag",
                    "audit", "dag run durations", "cluster reachability"):
        assert subject in titles, subject
    # every query is valid PromQL: promtool parses it as a recording rule
    recording = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"mirrorflow_dashboard_query_{i}", "expr": expr.replace("$__rate_interval", "5m")}
        for i, (_, expr) in enumerate(dashboard_exprs())]}]}
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(recording))
    checked = run_promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_lint_finds_nothing_in_the_full_rendering(promtool):
    checked = run_promtool("check", "metrics", stdin=render(full_topology(), full_inputs()))
    assert checked.returncode == 0 and not (checked.stdout + checked.stderr).strip(), checked.stdout + checked.stderr


@pytest.mark.parametrize("expr, labels", [
    ('sum by (link, topic) (rate(x{link="a", reason!~"b"}[5m]))', {"link", "topic", "reason"}),
    ("a > on(job, instance, group) group_left() b", {"job", "instance", "group"}),
])
def test_the_label_reader_of_these_tests_reads_labels(expr, labels):
    assert labels_named(expr) == labels
