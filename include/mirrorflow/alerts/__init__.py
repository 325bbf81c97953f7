"""Alerts that reach a person: incidents from what the DAGs produce, one message each, by e-mail or webhook.

Today's failures (a lag SLA exceeded, a partition stopped by a retention gap, a
window the audit found incomplete) become :class:`Incident` s with a key that
stays the same while they last; a ledger of the open ones (kept by the Airflow
glue in a Variable) makes one message when an incident opens and one when it is
over, not one per run. docs/alerts.md tells the whole of it.

The package, by what each module holds:

- :mod:`~mirrorflow.alerts.incident`: :class:`Incident`, :class:`Findings` (what one run saw) and the
  guide per kind (what to do);
- :mod:`~mirrorflow.alerts.lag`, :mod:`~mirrorflow.alerts.partitions`, :mod:`~mirrorflow.alerts.audit`:
  incidents of ``mirror_lag_monitor``'s snapshot, a level run's copy result, ``mirror_audit``'s summary;
- :mod:`~mirrorflow.alerts.ledger`: the open incidents and what one run changes (:func:`decide`);
- :mod:`~mirrorflow.alerts.message`: the text, the e-mail and the webhook bodies;
- :mod:`~mirrorflow.alerts.send`: SMTP and HTTP delivery.

Pure but for :mod:`~mirrorflow.alerts.send`; never imports Airflow.
"""

from __future__ import annotations

from mirrorflow.alerts.audit import audit_incidents
from mirrorflow.alerts.incident import GUIDES, Findings, Incident, task_failed
from mirrorflow.alerts.lag import lag_incidents
from mirrorflow.alerts.ledger import Decision, Notice, RunRef, decide
from mirrorflow.alerts.message import Message, compose, email, webhook_body
from mirrorflow.alerts.partitions import error_kind, partition_incidents
from mirrorflow.alerts.send import DeliveryFailed, SmtpServer, Webhook, post_json, send_email

__all__ = [
    "GUIDES",
    "Decision",
    "DeliveryFailed",
    "Findings",
    "Incident",
    "Message",
    "Notice",
    "RunRef",
    "SmtpServer",
    "Webhook",
    "audit_incidents",
    "compose",
    "decide",
    "email",
    "error_kind",
    "lag_incidents",
    "partition_incidents",
    "post_json",
    "send_email",
    "task_failed",
    "webhook_body",
]
