"""Alerts reach a person: mirror_lag_monitor under dag.test() on real brokers, a real SMTP server, a real receiver.

The SMTP server is aiosmtpd (with a login, so the password travels and must never
be logged), the webhook receiver ``http.server`` in a thread, both on free
loopback ports; the connections come from ``AIRFLOW_CONN_*`` variables as in
production. A link that lags past the SLA opens one incident: exactly one
e-mail and one POST, naming the link and its lag. The next breaching run sends
nothing; once the link is copied, the next run sends exactly one "resolved" of
each. The notifier runs in the task's own process after the task (Airflow's
``finalize``), so what it sent has arrived when ``dag.test()`` returns; the
waits below only bound it with a deadline.
"""

from __future__ import annotations

import json
import socket
from email import message_from_bytes
from email.message import Message

import pytest

from mirrorflow_airflow.factories.lag_monitor import build_lag_monitor_dag
from mirrorflow_airflow.state import INCIDENTS_VARIABLE, LAG_SNAPSHOT_VARIABLE, open_incidents
from tests.dags.dag_runs import states, task_output
from tests.fixtures.receivers import Inbox
from tests.integration.mirroring import clients, converge

pytestmark = [pytest.mark.airflow, pytest.mark.kafka,
              # a login over plain SMTP on loopback is what this test wants: no TLS to set up
              pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS:UserWarning")]

SMTP_PASSWORD = "smtp-s3cr3t-never-logged"
WEBHOOK_TOKEN = "hook-t0ken-never-logged"
WEBHOOK_PATH = "/services/T000/B000/s3cr3tp4th"
KEY = "mirror_lag_monitor:link:c1.L1"
ALERTS = """
lag: {sla: {records: 0}}
alerts:
  email: {conn_id: mf_alerts_smtp, to: [oncall@example.com], from_address: mirrorflow@example.com}
  webhook: {conn_id: mf_alerts_webhook}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def mailbox():
    """A real SMTP server (aiosmtpd) on a free loopback port that wants a login; the e-mails it accepted."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    inbox, logins = Inbox(), []

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            mail = message_from_bytes(envelope.content)
            mail["X-Test-Rcpt"] = ", ".join(envelope.rcpt_tos)
            inbox.add(mail)
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and auth_data.password == SMTP_PASSWORD.encode()
        logins.append(auth_data.login.decode() if isinstance(auth_data, LoginPassword) else None)
        return AuthResult(success=ok)

    controller = Controller(Handler(), hostname="127.0.0.1", port=free_port(), authenticator=authenticator,
                            auth_required=True, auth_require_tls=False)
    controller.start()
    inbox.port, inbox.logins = controller.port, logins
    try:
        yield inbox
    finally:
        controller.stop()


@pytest.fixture
def alert_connections(mailbox, receiver, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_MF_ALERTS_SMTP", json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": mailbox.port, "login": "mirrorflow",
        "password": SMTP_PASSWORD, "extra": {"disable_ssl": True, "disable_tls": True}}))
    monkeypatch.setenv("AIRFLOW_CONN_MF_ALERTS_WEBHOOK", json.dumps({
        "conn_type": "http", "host": "127.0.0.1", "port": receiver.port, "schema": "http",
        "password": WEBHOOK_TOKEN, "extra": {"path": WEBHOOK_PATH}}))


@pytest.fixture
def clean_variables(airflow_home):
    from airflow.models import Variable

    for key in (INCIDENTS_VARIABLE, LAG_SNAPSHOT_VARIABLE):
        Variable.delete(key)
    yield
    for key in (INCIDENTS_VARIABLE, LAG_SNAPSHOT_VARIABLE):
        Variable.delete(key)


def body_of(mail: Message) -> str:
    return mail.get_payload(decode=True).decode().replace("\r\n", "\n")  # SMTP's line ends


def test_a_lagging_link_is_one_email_and_one_post_until_it_is_copied_then_one_resolved_of_each(
        pending, kafka_clusters, mailbox, receiver, alert_connections, clean_variables,  # noqa: F811
        caplog, capfd):
    topo, topic = pending(extra=ALERTS)
    dag = build_lag_monitor_dag(topo)
    assert {t.task_id: len(t.on_failure_callback or []) for t in dag.tasks} == {"measure": 1, "check": 1}

    first = dag.test()
    assert states(first) == {"measure": "success", "check": "failed"}
    [mail] = mailbox.wait_for(1)
    [post] = receiver.wait_for(1)
    assert mail["Subject"] == "[mirrorflow] OPEN lag: link c1.L1 c1 -> c2"
    assert mail["X-Test-Rcpt"] == "oncall@example.com" and mail["From"] == "mirrorflow@example.com"
    assert mailbox.logins == ["mirrorflow"]
    text = body_of(mail)
    assert "What:   link c1.L1 c1 -> c2: 5 records behind, the oldest 36" in text  # an hour old: 3600 s and a bit
    assert "(SLA: at most 0 records)" in text
    assert f"  - link c1.L1 (c1 -> c2) {topic}[0]: 5 records > 0" in text
    assert f"/dags/mirror_lag_monitor/runs/{first.run_id}/tasks/check" in text.replace("%3A", ":").replace("%2B", "+")
    assert post["path"] == WEBHOOK_PATH and post["headers"]["Authorization"] == f"Bearer {WEBHOOK_TOKEN}"
    body = post["body"]
    assert (body["event"], body["key"], body["kind"]) == ("opened", KEY, "lag")
    assert body["subject"] == "link c1.L1 c1 -> c2" and "5 records behind" in body["summary"]
    assert body["text"] == text
    assert set(open_incidents("")) == {KEY}

    second = dag.test()  # still breaching: the same incident, nothing new
    assert states(second) == {"measure": "success", "check": "failed"}
    assert len(mailbox.items) == 1 and len(receiver.items) == 1
    record = open_incidents("")[KEY]
    assert record["run_id"] == first.run_id and record["last_run_id"] == second.run_id

    converge(topo, clients(kafka_clusters, topo))
    third = dag.test()
    assert states(third) == {"measure": "success", "check": "success"}
    _, resolved_mail = mailbox.wait_for(2)
    _, resolved_post = receiver.wait_for(2)
    assert resolved_mail["Subject"] == "[mirrorflow] RESOLVED lag: link c1.L1 c1 -> c2"
    assert resolved_mail["In-Reply-To"] == mail["Message-ID"]
    assert "Over:   mirror_lag_monitor no longer sees it" in body_of(resolved_mail)
    assert (resolved_post["body"]["event"], resolved_post["body"]["key"]) == ("resolved", KEY)
    assert open_incidents("") == {}
    assert len(mailbox.items) == 2 and len(receiver.items) == 2

    output = task_output(caplog, capfd)
    assert "alert channel email: opened" in output and "alert channel webhook: resolved" in output
    for secret in (SMTP_PASSWORD, WEBHOOK_TOKEN, WEBHOOK_PATH.rsplit("/", 1)[1]):
        assert secret not in output


def test_a_channel_that_fails_is_logged_by_name_and_does_not_hide_the_other(
        pending, mailbox, receiver, alert_connections, clean_variables, monkeypatch, caplog, capfd):  # noqa: F811
    dead = free_port()  # nobody listens there
    monkeypatch.setenv("AIRFLOW_CONN_MF_ALERTS_WEBHOOK", json.dumps({
        "conn_type": "http", "host": "127.0.0.1", "port": dead, "schema": "http", "password": WEBHOOK_TOKEN,
        "extra": {"path": WEBHOOK_PATH}}))
    topo, _ = pending(extra=ALERTS)
    run = build_lag_monitor_dag(topo).test()
    assert states(run) == {"measure": "success", "check": "failed"}
    [mail] = mailbox.wait_for(1)
    assert "OPEN lag: link c1.L1" in mail["Subject"] and receiver.items == []
    output = task_output(caplog, capfd)
    assert f"alert channel webhook (conn id mf_alerts_webhook): opened {KEY} not sent" in output
    assert WEBHOOK_TOKEN not in output and WEBHOOK_PATH.rsplit("/", 1)[1] not in output
    # the e-mail went out, the webhook is owed the opening: the next run tries it again
    assert open_incidents("")[KEY]["notified"] == ["email"]

