"""Alerts in the core: the ``alerts`` section, incidents and their keys, one message per incident, the text.

No broker and no Airflow: incidents come from hand-made lag snapshots, level
results and audit summaries in the formats the DAGs store (docs/lag.md,
docs/audit.md, docs/alerts.md). tests/dags/test_alerts.py sends them through a
real SMTP server and HTTP receiver from real DAG runs.
"""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta

import pytest

from mirrorflow import alerts
from mirrorflow.alerts import Findings, Incident, RunRef, decide
from mirrorflow.errors import TopologyError
from mirrorflow.lag import WHOLE, GroupPartitionLag, LagSnapshot, LinkPartitionLag, evaluate
from mirrorflow.topology import Topology
from mirrorflow.topology.alerts import KINDS, AlertsConfig
from mirrorflow.topology.lag import LagConfig
from tests.unit.topologies import four_with_lag

T0 = datetime(2026, 11, 22, 14, 4, 3, tzinfo=UTC)
CHANNELS = {"email": frozenset(KINDS), "webhook": frozenset({"gap", "audit"})}


def four(alerts_section=None) -> dict:
    data = four_with_lag()
    if alerts_section is not None:
        data["alerts"] = alerts_section
    return data


def refuse(section) -> TopologyError:
    with pytest.raises(TopologyError) as info:
        Topology.parse(four(section))
    text = str(info.value)
    assert "pydantic" not in text and "Input should" not in text, text
    return info.value


def run(minutes: int = 0, run_id: str = "r1") -> RunRef:
    return RunRef("mirror_lag_monitor", "check", run_id, T0 + timedelta(minutes=minutes),
                  f"http://airflow.example:8080/dags/mirror_lag_monitor/runs/{run_id}/tasks/check?try_number=1")


def snapshot(links=(), groups=(), unreachable=None, sla=None) -> dict:
    config = LagConfig.model_validate(sla or {})
    links, groups = list(links), list(groups)
    return LagSnapshot(T0, "demo", links=links, groups=groups, unreachable=dict(unreachable or {}),
                       violations=evaluate(config, links, groups),
                       sla=config.model_dump(mode="json", exclude_defaults=True)).to_dict()


def link_row(link="c1.L1", source="c1", target="c2", topic="orders", partition=0, records=5, seconds=3600.0,
             **kw) -> LinkPartitionLag:
    return LinkPartitionLag(link, 1, source, target, topic, partition, records, seconds, **kw)


# --------------------------------------------------------------------------- the alerts section


def test_without_the_section_nobody_is_told_and_a_full_one_round_trips():
    assert Topology.parse(four()).alerts is None
    assert "alerts" not in Topology.parse(four()).to_dict()
    topo = Topology.parse(four({
        "email": {"to": ["oncall@example.com"], "from_address": "mirrorflow@example.com", "kinds": ["gap", "lag"]},
        "webhook": {"format": "slack"},
        "docs_url": "https://git.example.com/mirrorflow/docs",
    }))
    config = topo.alerts
    assert config is not None and config.email is not None and config.webhook is not None
    assert config.email.conn_id == "smtp_default" and config.webhook.conn_id == "mirrorflow_alerts_webhook"
    assert config.resolved is True and config.webhook.timeout_seconds == 10
    assert config.kinds_by_channel() == {"email": frozenset({"gap", "lag"}), "webhook": frozenset(KINDS)}
    assert Topology.parse(topo.to_dict()) == topo
    assert topo.to_dict()["alerts"]["webhook"] == {"format": "slack"}  # defaults are not written back


@pytest.mark.parametrize("section, path, words", [
    ({}, "alerts", ("give email or webhook",)),
    ({"email": {}}, "alerts.email.to", ("required key is missing",)),
    ({"email": {"to": []}}, "alerts.email.to", ("at least 1",)),
    ({"email": {"to": ["oncall"]}}, "alerts.email.to", ("not an e-mail address", "'oncall'")),
    ({"email": {"to": ["a@b.c"], "from_address": "me"}}, "alerts.email.from_address", ("not an e-mail address",)),
    ({"email": {"to": ["a@b.c"], "password": "x"}}, "alerts.email", ("never go in the topology file", "password")),
    ({"webhook": {"url": "https://hooks.slack.com/services/T/B/X"}}, "alerts.webhook",
     ("never go in the topology file", "url", "conn_id")),
    ({"webhook": {"kinds": ["lagg"]}}, "alerts.webhook.kinds[0]", ("must be one of", "'gap'", "'lagg'")),
    ({"webhook": {"kinds": []}}, "alerts.webhook.kinds", ("at least 1",)),
    ({"webhook": {"format": "teams"}}, "alerts.webhook.format", ("'slack'", "'teams'")),
    ({"webhook": {"timeout_seconds": 0}}, "alerts.webhook.timeout_seconds", ("positive",)),
    ({"webhook": {"conn_id": "my hook"}}, "alerts.webhook.conn_id", ("without spaces",)),
    ({"webhook": {}, "resolved": "yes"}, "alerts.resolved", ("expected true or false",)),
    ({"emial": {"to": ["a@b.c"]}}, "alerts.emial", ("unknown key", "did you mean 'email'?")),
    ("yes", "alerts", ("expected a mapping",)),
])
def test_bad_sections_are_refused_naming_the_key(section, path, words):
    err = refuse(section)
    assert any(p == path and all(w in m for w in words) for p, m in err.problems), err.problems


# --------------------------------------------------------------------------- incidents of the lag monitor


def test_one_incident_per_violated_link_naming_link_lag_and_bound():
    snap = snapshot([link_row(partition=0, records=5, seconds=3600.0), link_row(partition=1, records=2, seconds=90.0),
                     link_row(link="c2.L1", source="c2", target="c1", records=0, seconds=0.0)],
                    sla={"sla": {"records": 0, "seconds": 600}})
    findings = alerts.lag_incidents(snap)
    assert findings.source == "mirror_lag_monitor" and findings.examined is None
    [incident] = findings.incidents
    assert incident.key == "mirror_lag_monitor:link:c1.L1" and incident.kind == "lag"
    assert incident.subject == "link c1.L1 c1 -> c2"
    assert incident.summary == ("link c1.L1 c1 -> c2: 7 records behind, the oldest 3600 s old "
                                "(SLA: at most 0 records and 600 s)")
    assert incident.details == ("link c1.L1 (c1 -> c2) orders[0]: 5 records > 0; 3600s > 600s",
                                "link c1.L1 (c1 -> c2) orders[1]: 2 records > 0")
    # the key stays the same whatever the numbers: the next run's lag is the same incident
    again = alerts.lag_incidents(snapshot([link_row(records=50, seconds=7200.0)], sla={"sla": {"records": 0}}))
    assert [i.key for i in again.incidents] == [incident.key]


def test_a_link_outside_its_replication_window_is_no_lag_incident_but_its_gap_still_is():
    snap = snapshot([link_row(records=500, seconds=7200.0),
                     link_row(link="c2.L1", source="c2", target="c1", records=10, checkpoint=0, start=10, end=20,
                              gap=10)], sla={"sla": {"records": 0}})
    snap["waiting"] = {"c1.L1": "2026-11-22T21:00:00+00:00", "c2.L1": "2026-11-22T21:00:00+00:00"}
    [incident] = alerts.lag_incidents(snap).incidents
    assert incident.key == "mirror_lag_monitor:link:c2.L1" and incident.kind == "gap"


def test_a_gap_is_its_own_kind_and_outranks_the_lag_of_the_same_link():
    snap = snapshot([link_row(partition=0, records=10, checkpoint=0, start=10, end=20, gap=10),
                     link_row(partition=1, records=3)], sla={"sla": {"records": 100}})
    [incident] = alerts.lag_incidents(snap).incidents
    assert incident.kind == "gap" and incident.key == "mirror_lag_monitor:link:c1.L1"
    assert "retention gap: offsets 0..9 (10) were deleted on c1" in incident.summary
    # without any bound a gap is still an incident (nothing later can copy it)
    [bare] = alerts.lag_incidents(snapshot([link_row(records=10, checkpoint=0, start=10, end=20, gap=10)])).incidents
    assert bare.kind == "gap"


def test_an_unreachable_cluster_is_one_incident_not_one_per_link():
    down = "is unreachable at 127.0.0.1:9: _TRANSPORT: connection refused"
    rows = [LinkPartitionLag(link, 1, src, dst, WHOLE, None, None, error=f"not measured: cluster c2 {down}")
            for link, src, dst in (("c1.L1", "c1", "c2"), ("c2.L1", "c2", "c1"))]
    groups = [GroupPartitionLag("c2", WHOLE, WHOLE, None, None,
                                error=f"consumer groups not measured: cluster c2 {down}"),
              GroupPartitionLag("c1", "orders-app", "orders", 0, 12, 40.0, committed=88, end=100)]
    snap = snapshot(rows, groups, unreachable={"c2": down},
                    sla={"sla": {"records": 0}, "groups": [{"groups": "orders-.*", "records": 5}]})
    by_key = {i.key: i for i in alerts.lag_incidents(snap).incidents}
    assert set(by_key) == {"mirror_lag_monitor:cluster:c2", "mirror_lag_monitor:group:c1/orders-app"}
    cluster = by_key["mirror_lag_monitor:cluster:c2"]
    assert cluster.kind == "unreachable" and cluster.summary == f"cluster c2 {down}" and len(cluster.details) == 3
    group = by_key["mirror_lag_monitor:group:c1/orders-app"]
    assert group.kind == "lag" and group.subject == "group orders-app on c1"
    assert group.summary == ("group orders-app on c1: 12 records not consumed, the oldest 40 s old "
                             "(SLA: at most 5 records)")


def test_a_snapshot_within_the_sla_has_no_incident():
    assert alerts.lag_incidents(snapshot([link_row()], sla={"sla": {"records": 10}})).incidents == ()


# --------------------------------------------------------------------------- incidents of level runs and the audit


def detail(topic="orders", partition=0, error="boom", link="c1.L1", offset=None) -> dict:
    return {"link": link, "source": "c1", "target": "c2", "topic": topic, "partition": partition, "offset": offset,
            "error": error}


def test_failed_partitions_of_a_level_run_with_gap_truncated_and_unreachable_kinds():
    gap = ("retention gap: offsets 10..19 (10) are no longer on c1 and were never copied; the partition stops at 10 "
           "(on_gap: fail; on_gap: skip steps over them with a recorded loss)")
    result = {"level": 1, "ok": False, "links": [{"link": "c1.L1"}, {"link": "c3.L1"}, {"link": "c2.L1"}],
              "error_details": [
                  detail(partition=0, error=gap),
                  detail(partition=1, error="truncated source: c1 orders[1] ends at offset 3, below ..."),
                  detail(partition=2, offset=42, error="MSG_SIZE_TOO_LARGE: the target refused the message"),
                  detail(partition=3, error="the link has no checkpoint on c2, but c2 already holds 5 copies of ..."),
                  detail(link="c3.L1", topic="*", partition=None,
                         error="planning failed: cluster c4 (127.0.0.1:9) is unreachable: timed out")]}
    findings = alerts.partition_incidents(result, "mirror_level_1")
    by_key = {i.key: i for i in findings.incidents}
    assert {k: i.kind for k, i in by_key.items()} == {
        "mirror_level_1:partition:c1.L1:orders:0": "gap",
        "mirror_level_1:partition:c1.L1:orders:1": "truncated",
        "mirror_level_1:partition:c1.L1:orders:2": "partition",
        "mirror_level_1:partition:c1.L1:orders:3": "checkpoint",
        "mirror_level_1:link:c3.L1": "unreachable",
    }
    third = by_key["mirror_level_1:partition:c1.L1:orders:2"]
    assert third.summary == ("link c1.L1 c1 -> c2 orders[2] at source offset 42: MSG_SIZE_TOO_LARGE: the target "
                             "refused the message")
    # c3.L1 was not planned, so this run cannot say its partitions copied; a link it did not report neither
    assert findings.saw(("c1.L1",)) and findings.saw(("c2.L1",))
    assert not findings.saw(("c3.L1",)) and not findings.saw(("c4.L3",))


def test_audit_differences_are_one_incident_per_cluster_topic_and_origin():
    window = int(datetime(2026, 11, 22, 13, 0, tzinfo=UTC).timestamp() * 1000)
    summary = {"read": {"c1": 10, "c2": 9}, "unreachable": {"c3": "cluster c3 is unreachable"}, "differences": [
        {"topic": "orders", "window_ms": window + 600_000, "origin": "c1", "cluster": "c2", "expected": 5, "held": 4},
        {"topic": "orders", "window_ms": window, "origin": "c1", "cluster": "c2", "expected": 5, "held": 6,
         "missing_count": 0, "missing": [], "duplicated_count": 1, "duplicated": [[0, 3]], "unexpected_count": 0,
         "unexpected": []}]}
    findings = alerts.audit_incidents(summary)
    by_key = {i.key: i for i in findings.incidents}
    assert set(by_key) == {"mirror_audit:cluster:c3", "mirror_audit:difference:c2:orders:c1"}
    diff = by_key["mirror_audit:difference:c2:orders:c1"]
    assert diff.kind == "audit" and diff.summary == (
        "c2 does not hold c1's messages of topic orders exactly once: window 2026-11-22 13:00: 6 of 5; "
        "window 2026-11-22 13:10: 4 of 5")
    assert "duplicated 1 [[0, 3]]" in diff.details[0]
    assert by_key["mirror_audit:cluster:c3"].kind == "unreachable"
    assert findings.saw(("c2", "c1")) and not findings.saw(("c3", "c1"))


def test_clusters_unaudited_until_proofs_drop_are_one_proofs_incident_over_when_every_cluster_is_audited():
    last = int(datetime(2026, 11, 22, 13, 0, tzinfo=UTC).timestamp() * 1000)
    summary = {"read": {"c1": 10}, "unreachable": {"c2": "down", "c3": "down"}, "differences": [],
               "proofs_dropping": {"unaudited": ["c2", "c3"], "last_full_audit_ms": last,
                                   "dropped_before_ms": last + 900_000}}
    by_key = {i.key: i for i in alerts.audit_incidents(summary).incidents}
    proofs = by_key["mirror_audit:proofs"]
    assert proofs.kind == "proofs" and proofs.summary == (
        "no window was proven since 2026-11-22 13:00 UTC (the last audit of every cluster): c2 and c3 not audited; "
        "windows that ended before 2026-11-22 13:15 UTC are no longer announced on any cluster")
    assert alerts.audit_incidents({"read": {"c1": 1, "c2": 1, "c3": 1}}).saw(proofs.scopes)


# --------------------------------------------------------------------------- one message per incident


def lag_findings(*links: str, kind: str = "lag", source: str = "mirror_lag_monitor") -> Findings:
    return Findings(source, tuple(Incident(f"{source}:link:{l}", kind, source, f"link {l} c1 -> c2",
                                           f"link {l} c1 -> c2: 5 records behind", ("d",), (l,)) for l in links))


def test_an_incident_opens_once_stays_quiet_while_it_lasts_and_resolves_once():
    first = decide({}, lag_findings("c1.L1"), run(0), CHANNELS)
    [notice] = first.notices
    assert (notice.event, notice.key, notice.channels) == ("opened", "mirror_lag_monitor:link:c1.L1", ("email",))
    ledger = first.apply({}, {(notice.key, "email"): True})
    record = ledger[notice.key]
    assert record["opened_at"] == T0.isoformat() and record["notified"] == ["email"] and record["kind"] == "lag"

    second = decide(ledger, lag_findings("c1.L1"), run(1, "r2"), CHANNELS)
    assert second.notices == []  # still open: nothing new
    ledger = second.apply(ledger)
    assert ledger[notice.key]["last_seen"] == (T0 + timedelta(minutes=1)).isoformat()
    assert ledger[notice.key]["opened_at"] == T0.isoformat() and ledger[notice.key]["last_run_id"] == "r2"

    third = decide(ledger, lag_findings(), run(5, "r3"), CHANNELS)
    [resolved] = third.notices
    assert (resolved.event, resolved.channels) == ("resolved", ("email",))
    assert resolved.record["resolved_run_id"] == "r3"
    assert third.apply(ledger) == {}
    assert decide({}, lag_findings(), run(6), CHANNELS).notices == []  # and nothing more after that


def test_a_channel_that_failed_is_tried_again_and_only_channels_that_heard_get_the_resolution():
    findings = lag_findings("c1.L1", kind="gap")
    first = decide({}, findings, run(0), CHANNELS)
    [notice] = first.notices
    assert notice.channels == ("email", "webhook")
    ledger = first.apply({}, {(notice.key, "email"): True, (notice.key, "webhook"): False})
    retry = decide(ledger, findings, run(1), CHANNELS)
    assert [(n.event, n.channels) for n in retry.notices] == [("opened", ("webhook",))]
    ledger = retry.apply(ledger, {(notice.key, "webhook"): True})
    assert ledger[notice.key]["notified"] == ["email", "webhook"]
    assert decide(ledger, findings, run(2), CHANNELS).notices == []
    [over] = decide(ledger, lag_findings(), run(3), CHANNELS).notices
    assert over.channels == ("email", "webhook")


def test_only_the_own_source_and_what_the_run_looked_at_is_resolved():
    ledger = decide({}, lag_findings("c1.L1"), run(0), CHANNELS).apply({})
    ledger = decide(ledger, lag_findings("c3.L1", source="mirror_level_1"), run(0), CHANNELS).apply(ledger)
    assert len(ledger) == 2
    # a level run that did not look at c3.L1 (outside its window, say) says nothing about it
    blind = decide(ledger, Findings("mirror_level_1", (), frozenset({"c1.L1", "task"})), run(1), CHANNELS)
    assert blind.notices == [] and blind.dropped == []
    # one that did resolves it, and leaves the lag monitor's incident alone
    seen = decide(ledger, Findings("mirror_level_1", (), frozenset({"c3.L1", "task"})), run(2), CHANNELS)
    assert seen.dropped == ["mirror_level_1:link:c3.L1"]
    assert set(seen.apply(ledger)) == {"mirror_lag_monitor:link:c1.L1"}


def test_a_changed_kind_is_announced_again_and_resolved_false_drops_in_silence():
    ledger = decide({}, lag_findings("c1.L1"), run(0), CHANNELS).apply({}, {("mirror_lag_monitor:link:c1.L1",
                                                                               "email"): True})
    worse = decide(ledger, lag_findings("c1.L1", kind="gap"), run(3), CHANNELS)
    [notice] = worse.notices
    assert notice.channels == ("email", "webhook") and notice.record["was"] == "lag"
    assert notice.record["opened_at"] == T0.isoformat()  # since when: the incident's start, not the change
    quiet = decide(ledger, lag_findings(), run(4), CHANNELS, send_resolved=False)
    assert quiet.notices == [] and quiet.dropped == ["mirror_lag_monitor:link:c1.L1"]


def test_a_task_that_failed_without_a_result_is_an_incident_that_blocks_nothing_else():
    findings = alerts.task_failed("mirror_level_1", "copy", "SparkSubmitError: spark-submit exited with 1")
    [incident] = findings.incidents
    assert (incident.key, incident.kind) == ("mirror_level_1:task:copy", "task")
    ledger = decide({}, lag_findings("c1.L1", source="mirror_level_1"), run(0), CHANNELS).apply({})
    assert decide(ledger, findings, run(1), CHANNELS).dropped == []  # no result: nothing else resolves
    ledger = decide(ledger, findings, run(1), CHANNELS).apply(ledger)
    later = alerts.partition_incidents({"links": [{"link": "c1.L1"}], "error_details": []}, "mirror_level_1")
    assert sorted(decide(ledger, later, run(2), CHANNELS).dropped) == ["mirror_level_1:link:c1.L1",
                                                                       "mirror_level_1:task:copy"]


# --------------------------------------------------------------------------- the messages


def opened_message(docs_url=None):
    snap = snapshot([link_row(records=5, seconds=3600.0)], sla={"sla": {"records": 0}})
    decision = decide({}, alerts.lag_incidents(snap), run(0), CHANNELS)
    [notice] = decision.notices
    return alerts.compose(notice.event, notice.key, notice.record, "demo", docs_url), decision


def test_the_opening_message_says_what_where_since_when_what_to_do_and_links_the_log():
    message, _ = opened_message()
    assert message.title == "[mirrorflow demo] OPEN lag: link c1.L1 c1 -> c2"
    lines = message.text.splitlines()
    assert lines[0] == message.title
    assert "What:   link c1.L1 c1 -> c2: 5 records behind, the oldest 3600 s old (SLA: at most 0 records)" in lines
    assert "Where:  mirror_lag_monitor, task check, run r1" in lines
    assert "Since:  2026-11-22 14:04:03 UTC" in lines
    assert any(l.startswith("To do:  Check that the link's level DAG (mirror_level_<L>)") for l in lines)
    assert "Docs:   docs/alerts.md#lag (in the mirrorflow repository)" in lines
    assert "Log:    http://airflow.example:8080/dags/mirror_lag_monitor/runs/r1/tasks/check?try_number=1" in lines
    assert "  - link c1.L1 (c1 -> c2) orders[0]: 5 records > 0" in lines
    assert lines[-1] == ("Incident mirror_lag_monitor:link:c1.L1: no other message while it lasts; one more when it "
                         "is over.")
    linked, _ = opened_message("https://git.example.com/mirrorflow/docs/")
    assert "Docs:   https://git.example.com/mirrorflow/docs/alerts.md#lag" in linked.text


def test_the_resolution_says_how_long_it_lasted_and_answers_the_opening_mail():
    opened, decision = opened_message()
    ledger = decision.apply({}, {(opened.key, "email"): True})
    [notice] = decide(ledger, Findings("mirror_lag_monitor"), run(65, "r9"), CHANNELS).notices
    message = alerts.compose(notice.event, notice.key, notice.record, "demo")
    assert message.title == "[mirrorflow demo] RESOLVED lag: link c1.L1 c1 -> c2"
    assert ("Over:   mirror_lag_monitor no longer sees it (run r9, 2026-11-22 15:09:03 UTC); it lasted 1 h 5 min"
            in message.text)
    assert "Was:    link c1.L1 c1 -> c2: 5 records behind" in message.text
    assert "/runs/r9/tasks/check" in message.text and "/runs/r1/tasks/check" in message.text

    first = alerts.email(opened, "mirrorflow@example.com", ["oncall@example.com", "kafka@example.com"])
    second = alerts.email(message, "mirrorflow@example.com", ["oncall@example.com"])
    assert first["Subject"] == opened.title and first["To"] == "oncall@example.com, kafka@example.com"
    assert second["In-Reply-To"] == first["Message-ID"] and second["X-Mirrorflow-Event"] == "resolved"
    assert "5 records behind" in first.get_content()


def test_webhook_bodies_generic_slack_and_pagerduty():
    message, _ = opened_message()
    generic = alerts.webhook_body(message)
    assert generic["event"] == "opened" and generic["key"] == "mirror_lag_monitor:link:c1.L1"
    assert generic["kind"] == "lag" and generic["subject"] == "link c1.L1 c1 -> c2" and generic["text"] == message.text
    assert generic["log_url"].endswith("/runs/r1/tasks/check?try_number=1")
    assert alerts.webhook_body(message, "slack") == {"text": message.text}
    page = alerts.webhook_body(message, "pagerduty", routing_key="R0UT1NG")
    assert page["routing_key"] == "R0UT1NG" and page["event_action"] == "trigger"
    assert page["dedup_key"] == message.key and page["payload"]["severity"] == "error"
    assert page["payload"]["summary"] == message.title and page["links"][0]["href"] == message.log_url


# --------------------------------------------------------------------------- delivery failures keep secrets


def test_a_failed_post_names_no_secret_and_a_webhook_must_be_http():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hook = alerts.Webhook(f"http://127.0.0.1:{port}/services/T000/B000/s3cr3tpath",
                          {"Authorization": "Bearer t0ken-s3cr3t"}, timeout=2)
    with pytest.raises(alerts.DeliveryFailed) as info:
        alerts.post_json(hook, {"text": "x"})
    assert "s3cr3tpath" not in str(info.value) and "t0ken-s3cr3t" not in str(info.value)
    assert "s3cr3tpath" not in repr(hook) and "t0ken" not in repr(hook)
    with pytest.raises(alerts.DeliveryFailed, match="http:// or https://"):
        alerts.Webhook("file:///etc/passwd")
    assert "hunter2" not in repr(alerts.SmtpServer("smtp.example.com", 587, "me", "hunter2"))


def test_every_kind_has_a_guide_and_a_section_in_the_docs():
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "alerts.md").read_text()
    for kind in KINDS:
        guide = alerts.GUIDES[kind]
        assert guide.action and f"\n### {guide.anchor}\n" in docs, kind
    reference = (Path(__file__).resolve().parents[2] / "docs" / "topology.md").read_text()
    channels = {"email": alerts_fields("email"), "webhook": alerts_fields("webhook")}
    for key in [f"alerts.{k}" for k in AlertsConfig.model_fields] + [
            f"alerts.{c}.{k}" for c, fields in channels.items() for k in fields]:
        assert f"`{key}`" in reference, f"{key} is not in docs/topology.md"


def alerts_fields(channel: str) -> list[str]:
    from mirrorflow.topology.alerts import EmailChannel, WebhookChannel

    return list((EmailChannel if channel == "email" else WebhookChannel).model_fields)


def test_a_change_a_sync_declined_is_an_incident_of_its_own_while_runs_keep_declining_it():
    from mirrorflow.declined import Declined

    declined = Declined("acl_sync", "c2", "ALLOW User:* READ on TOPIC 'orders'", "create ...", "a wildcard principal")
    result = {"level": 1, "ok": True, "links": [{"link": "c1.L1", "declined": [declined.to_dict()]}],
              "error_details": []}
    findings = alerts.partition_incidents(result, "mirror_level_1")
    [incident] = findings.incidents
    assert (incident.kind, incident.scopes) == ("declined", ("c1.L1",))
    assert incident.key == "mirror_level_1:declined:acl_sync:c2:ALLOW User:* READ on TOPIC 'orders'"
    assert incident.summary == declined.explain() and "declined" in KINDS
    later = alerts.partition_incidents({"links": [{"link": "c1.L1", "declined": []}], "error_details": []},
                                       "mirror_level_1")
    assert not later.incidents and later.saw(incident.scopes)  # a run that no longer declines it resolves it
