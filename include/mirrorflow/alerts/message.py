"""What a person reads: one message per incident opened or resolved, as text, e-mail and webhook JSON.

Every message says what (the incident's summary), where (DAG, task, run), since
when, what to do (a sentence per kind and the section of docs/alerts.md), and
links the task's log in the Airflow UI. docs/alerts.md shows the format.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import formatdate
from typing import Any

from mirrorflow.alerts.incident import GUIDES, Guide

#: Kinds PagerDuty-style receivers page as critical: data is at risk until a person acts.
CRITICAL = frozenset({"gap", "truncated", "checkpoint", "audit"})
DOCS_PAGE = "alerts.md"


@dataclass(frozen=True)
class Message:
    """One message, ready for any channel: ``title`` is the e-mail subject, ``text`` the whole of it."""

    event: str
    key: str
    kind: str
    title: str
    text: str
    record: Mapping[str, Any]
    action: str
    docs: str
    topology: str

    @property
    def log_url(self) -> str:
        return str(self.record.get("resolved_log_url" if self.event == "resolved" else "last_log_url")
                   or self.record.get("log_url") or "")


def when(iso: str | None) -> str:
    """``2026-11-22T14:04:03.183+00:00`` -> ``2026-11-22 14:04:03 UTC``."""
    if not iso:
        return "?"
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return iso


def lasted(start: str | None, end: str | None) -> str:
    """How long between two ISO times, in words a pager reads (``1 h 5 min``)."""
    try:
        seconds = int((datetime.fromisoformat(end or "") - datetime.fromisoformat(start or "")).total_seconds())
    except ValueError:
        return "?"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{max(seconds, 0)} s"
    if hours < 1:
        return f"{minutes} min"
    if days < 2:
        return f"{hours} h {minutes % 60} min"
    return f"{days} d {hours % 24} h"


def docs_link(guide: Guide, docs_url: str | None) -> str:
    if docs_url:
        return f"{docs_url.rstrip('/')}/{DOCS_PAGE}#{guide.anchor}"
    return f"docs/{DOCS_PAGE}#{guide.anchor} (in the mirrorflow repository)"


def compose(event: str, key: str, record: Mapping[str, Any], topology: str, docs_url: str | None = None,
            resolved: bool = True) -> Message:
    """The message for ``event`` (``opened`` or ``resolved``) of the ledger record ``record``.

    ``resolved``: whether a message follows when the incident is over (the topology's ``alerts.resolved``).
    """
    kind = str(record.get("kind", "task"))
    guide = GUIDES.get(kind, GUIDES["task"])
    tag = "[mirrorflow]" if topology == "mirrorflow" else f"[mirrorflow {topology}]"
    word = "OPEN" if event == "opened" else "RESOLVED"
    title = f"{tag} {word} {kind}: {record.get('subject', key)}"
    docs = docs_link(guide, docs_url)
    where = f"{record.get('dag_id')}, task {record.get('task_id')}, run {record.get('run_id')}"
    if event == "opened":
        lines = [title, "",
                 f"What:   {record.get('summary_now') or record.get('summary')}",
                 f"Where:  {where}",
                 f"Since:  {when(record.get('opened_at'))}"
                 + (f" (last seen {when(record.get('last_seen'))})" if record.get("last_seen") != record.get(
                     "opened_at") else ""),
                 f"To do:  {guide.action}",
                 f"Docs:   {docs}",
                 f"Log:    {record.get('last_log_url') or record.get('log_url') or '(no log address)'}"]
        if record.get("was"):
            lines.insert(5, f"Before: {record['was']}, since {when(record.get('opened_at'))}; now {kind} "
                            f"({guide.title})")
        details = list(record.get("details") or [])
        if details:
            lines += ["", "Details:"] + [f"  - {d}" for d in details]
            if record.get("more_details"):
                lines.append(f"  (and {record['more_details']} more in the task log)")
        lines += ["", f"Incident {key}: no other message while it lasts"
                      + ("; one more when it is over." if resolved else ".")]
    else:
        took = lasted(record.get("opened_at"), record.get("resolved_at"))
        lines = [title, "",
                 f"Over:   {record.get('dag_id')} no longer sees it (run {record.get('resolved_run_id')}, "
                 f"{when(record.get('resolved_at'))}); it lasted {took}",
                 f"Was:    {record.get('summary')}",
                 f"Since:  {when(record.get('opened_at'))}, first seen in {where}",
                 f"Docs:   {docs}",
                 f"Log:    {record.get('resolved_log_url') or '(no log address)'}",
                 f"Opened: {record.get('log_url') or '(no log address)'}",
                 "", f"Incident {key}: resolved."]
    return Message(event, key, kind, title, "\n".join(lines) + "\n", record, guide.action, docs, topology)


def _message_id(key: str, opened_at: str | None) -> str:
    digest = hashlib.sha256(f"{key}|{opened_at}".encode()).hexdigest()[:32]
    return f"<{digest}@mirrorflow.alerts>"


def email(message: Message, sender: str, to: list[str]) -> EmailMessage:
    """The message as an e-mail; the resolution answers the opening (mail readers show them as one thread)."""
    mail = EmailMessage()
    mail["Subject"] = message.title
    mail["From"] = sender
    mail["To"] = ", ".join(to)
    mail["Date"] = formatdate(localtime=False, usegmt=True)
    opening = _message_id(message.key, message.record.get("opened_at"))
    if message.event == "opened":
        mail["Message-ID"] = opening
    else:
        mail["In-Reply-To"] = opening
        mail["References"] = opening
    mail["X-Mirrorflow-Incident"] = message.key
    mail["X-Mirrorflow-Event"] = message.event
    mail.set_content(message.text)
    return mail


def webhook_body(message: Message, fmt: str = "generic", routing_key: str | None = None) -> dict[str, Any]:
    """The JSON body of a webhook POST in ``fmt``: ``generic`` (every field, and ``text``), ``slack``, ``pagerduty``."""
    r = message.record
    if fmt == "slack":  # Slack and Teams incoming webhooks read "text"
        return {"text": message.text}
    if fmt == "pagerduty":  # PagerDuty Events API v2; the routing key comes from the connection
        body: dict[str, Any] = {"routing_key": routing_key or "", "dedup_key": message.key,
                                "event_action": "trigger" if message.event == "opened" else "resolve"}
        if message.event == "opened":
            body["payload"] = {
                "summary": message.title[:1024], "source": str(r.get("dag_id") or message.topology),
                "severity": "critical" if message.kind in CRITICAL else "error", "component": str(r.get("subject")),
                "group": message.topology, "class": message.kind,
                "custom_details": {"what": r.get("summary"), "to do": message.action, "docs": message.docs,
                                   "since": r.get("opened_at"), "details": list(r.get("details") or [])}}
            if message.log_url:
                body["links"] = [{"href": message.log_url, "text": "Airflow task log"}]
        return body
    return {
        "event": message.event, "key": message.key, "kind": message.kind, "title": message.title,
        "subject": r.get("subject"), "summary": r.get("summary"), "details": list(r.get("details") or []),
        "action": message.action, "docs": message.docs, "topology": message.topology, "source": r.get("source"),
        "dag_id": r.get("dag_id"), "task_id": r.get("task_id"), "run_id": r.get("run_id"),
        "opened_at": r.get("opened_at"), "last_seen": r.get("last_seen"), "resolved_at": r.get("resolved_at"),
        "log_url": message.log_url, "text": message.text,
    }
