"""Alerts that reach a person: an Airflow notifier on the tasks whose failures are incidents (docs/alerts.md).

:class:`MirrorAlertNotifier` is an :class:`airflow.sdk.BaseNotifier`, attached by
the DAG factories as ``on_failure_callback`` and ``on_success_callback`` of

- ``check`` of ``mirror_lag_monitor`` (the snapshot of ``measure``),
- ``copy`` of every ``mirror_level_<L>`` (its result, pushed even when it fails),
- ``check`` of ``mirror_audit`` (the summary of ``count``),

and as ``on_failure_callback`` of the tasks those read from (a ``measure`` or
``count`` that fails is an incident of its own). Only when the topology has an
``alerts`` section: :func:`alert_callbacks` gives nothing otherwise.

A callback runs once a task instance is final (after its last retry), in the
task's own process. It reads what the task produced, turns it into incidents
(:mod:`mirrorflow.alerts`), compares them with the open ones in the Variable
``mirrorflow_alert_incidents`` and sends one message per incident opened and one
per incident over, by e-mail (SMTP, the ``alerts.email.conn_id`` connection) and
webhook (JSON POST, the ``alerts.webhook.conn_id`` connection), both read by the
hooks of :mod:`mirrorflow_airflow.hooks.alerts`. A channel that fails is logged
as an error naming it and its connection and does not stop the other; its
opening message is tried again by the next run. Secrets (password, token,
webhook URL) are handed to Airflow's log masker and never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from airflow.sdk import BaseNotifier

from mirrorflow import alerts
from mirrorflow.alerts import Findings, Message, RunRef
from mirrorflow.errors import MirrorflowError
from mirrorflow.topology import Topology
from mirrorflow.topology.alerts import AlertsConfig, EmailChannel
from mirrorflow_airflow.hooks.alerts import AlertEmailHook, AlertWebhookHook
from mirrorflow_airflow.state import open_incidents, set_open_incidents

log = logging.getLogger(__name__)

#: What a notifier reads the incidents from: the lag snapshot, a level run's result, an audit summary, or
#: nothing but the task's own failure.
Reader = Literal["lag", "copy", "audit", "task"]
#: Characters of a task's exception quoted in a "task" incident.
ERROR_CHARS = 500


class MirrorAlertNotifier(BaseNotifier):
    """Turn what a task produced into incidents and tell the topology's alert channels what opened or is over.

    ``reader`` says what to read (:data:`Reader`), ``result_task_id`` the task whose
    XCom holds it (default: the task itself), ``failed`` whether this is the failure
    callback.
    """

    template_fields = ()

    def __init__(self, *, alerts_config: AlertsConfig, topology: str, reader: Reader, failed: bool,
                 result_task_id: str | None = None, ns: str = "") -> None:
        super().__init__()
        self.alerts_config = alerts_config
        self.topology = topology
        self.reader = reader
        self.failed = failed
        self.result_task_id = result_task_id
        self.ns = ns  # the tree's namespace: its open incidents are its own

    # ----------------------------------------------------------------- reading

    def findings(self, context: Any) -> Findings:
        """What the task produced, as incidents (a failure with nothing to read is one ``task`` incident)."""
        ti = context["ti"]
        source = str(ti.dag_id)
        if self.reader == "task":
            return self._task_failed(context, source) if self.failed else Findings(source, (), frozenset())
        produced = ti.xcom_pull(task_ids=self.result_task_id or ti.task_id)
        if not produced:
            return self._task_failed(context, source) if self.failed else Findings(source, (), frozenset())
        if self.reader == "lag":
            return alerts.lag_incidents(produced, source)
        if self.reader == "copy":
            return alerts.partition_incidents(produced, source)
        return alerts.audit_incidents(produced, source)

    @staticmethod
    def _task_failed(context: Any, source: str) -> Findings:
        error = context.get("exception")
        text = "" if error is None else f"{type(error).__name__}: {error}"
        if len(text) > ERROR_CHARS:
            text = text[:ERROR_CHARS] + " ... (the task log has the rest)"
        return alerts.task_failed(source, str(context["ti"].task_id), text)

    # ----------------------------------------------------------------- sending

    def notify(self, context: Any) -> None:
        ti = context["ti"]
        try:
            log_url = str(ti.log_url)
        except Exception:  # an address is a convenience; the message goes out without it
            log_url = ""
        run = RunRef(str(ti.dag_id), str(ti.task_id), str(ti.run_id), datetime.now(UTC), log_url)
        findings = self.findings(context)
        config = self.alerts_config
        decision = alerts.decide(open_incidents(self.ns), findings, run, config.kinds_by_channel(),
                                 send_resolved=config.resolved)
        senders: dict[str, Callable[[Message], None] | None] = {}
        delivered: dict[tuple[str, str], bool] = {}
        for notice in decision.notices:
            message = alerts.compose(notice.event, notice.key, notice.record, self.topology, config.docs_url,
                                     config.resolved)
            for name in notice.channels:
                if name not in senders:
                    senders[name] = self._sender(name)
                ok = self._send(name, senders[name], message)
                if notice.event == "opened":
                    delivered[(notice.key, name)] = ok
        if decision.records or decision.dropped:
            set_open_incidents(self.ns, decision.apply(open_incidents(self.ns), delivered))
        log.info("alerts of %s: %d incident(s) open now, %d message(s) of opening, %d of resolution",
                 findings.source, len(decision.records), len(decision.opened), len(decision.resolved))

    def _conn_id(self, name: str) -> str:
        return str(self.alerts_config.channels()[name].conn_id)

    def _sender(self, name: str) -> Callable[[Message], None] | None:
        """How to send on channel ``name``, its connection read once per callback; ``None`` when unusable."""
        channel = self.alerts_config.channels()[name]
        try:
            if isinstance(channel, EmailChannel):
                server = AlertEmailHook(channel).server()
                sender = channel.from_address or server.sender
                if not sender:
                    raise MirrorflowError("no sender address: set alerts.email.from_address or the connection's "
                                          "extra from_email")
                to = list(channel.to)

                def send_mail(message: Message) -> None:
                    alerts.send_email(server, alerts.email(message, sender, to))

                return send_mail
            endpoint, routing_key = AlertWebhookHook(channel).endpoint()
            fmt = channel.format

            def post(message: Message) -> None:
                alerts.post_json(endpoint, alerts.webhook_body(message, fmt, routing_key))

            return post
        except Exception as exc:  # a missing connection must not hide the other channel
            log.error("alert channel %s (conn id %s) cannot be used: %s: %s", name, self._conn_id(name),
                      type(exc).__name__, exc)
            return None

    def _send(self, name: str, sender: Callable[[Message], None] | None, message: Message) -> bool:
        if sender is None:
            log.error("alert channel %s (conn id %s): %s %s not sent (the channel cannot be used, see above)", name,
                      self._conn_id(name), message.event, message.key)
            return False
        try:
            sender(message)
        except Exception as exc:  # one channel failing must not hide the other
            log.error("alert channel %s (conn id %s): %s %s not sent: %s: %s", name, self._conn_id(name),
                      message.event, message.key, type(exc).__name__, exc)
            return False
        log.info("alert channel %s: %s %s sent (%s)", name, message.event, message.key, message.kind)
        return True


def alert_callbacks(topology: Topology, reader: Reader, result_task_id: str | None = None) -> dict[str, Any]:
    """``on_failure_callback`` and ``on_success_callback`` for a task's arguments; nothing without ``alerts``.

    ``reader="task"``: only the failure callback (the task's failure is the incident; success says nothing).
    """
    config = topology.alerts
    if config is None:
        return {}

    def notifier(failed: bool) -> MirrorAlertNotifier:
        return MirrorAlertNotifier(alerts_config=config, topology=topology.name, reader=reader, failed=failed,
                                   result_task_id=result_task_id, ns=topology.namespace)

    if reader == "task":
        return {"on_failure_callback": [notifier(True)]}
    return {"on_failure_callback": [notifier(True)], "on_success_callback": [notifier(False)]}
