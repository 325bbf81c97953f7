"""Delivering a message: e-mail over SMTP and a JSON POST, with what the caller read from its connections.

Plain standard library (``smtplib``, ``urllib``), no Airflow: the glue resolves
the Airflow connections into a :class:`SmtpServer` or a :class:`Webhook` and hands
them here. Neither keeps its secret in its ``repr``, and a failure is one
:class:`DeliveryFailed` whose message never holds the password, the token or
the webhook's URL (a Slack or Teams URL is itself the secret).
"""

from __future__ import annotations

import json
import smtplib
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

from mirrorflow.errors import MirrorflowError

#: How much of a refusing receiver's answer a failure quotes.
ANSWER_CHARS = 300


class DeliveryFailed(MirrorflowError):
    """A message did not reach its channel."""


@dataclass(frozen=True)
class SmtpServer:
    """An SMTP server as an Airflow SMTP connection gives it (``disable_ssl``/``disable_tls`` in its extra)."""

    host: str
    port: int
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    #: Connect with TLS from the start (SMTPS, usually port 465).
    use_ssl: bool = True
    #: Upgrade a plain connection with STARTTLS (usually port 587); ignored with ``use_ssl``.
    starttls: bool = True
    timeout: float = 30.0
    sender: str | None = None


@dataclass(frozen=True)
class Webhook:
    """Where a JSON POST goes: the URL, extra headers (a bearer token) and how long to wait."""

    url: str = field(repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout: float = 10.0

    def __post_init__(self) -> None:
        scheme = urlsplit(self.url).scheme
        if scheme not in ("http", "https") or not urlsplit(self.url).netloc:
            raise DeliveryFailed(f"a webhook URL must be http:// or https:// with a host, got scheme {scheme!r}")


def _scrub(text: str, *secrets: str | None) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def send_email(server: SmtpServer, message: EmailMessage) -> None:
    """Send ``message`` through ``server`` (TLS per its settings; login only when it has one)."""
    try:
        smtp: smtplib.SMTP
        if server.use_ssl:
            smtp = smtplib.SMTP_SSL(server.host, server.port, timeout=server.timeout,
                                    context=ssl.create_default_context())
        else:
            smtp = smtplib.SMTP(server.host, server.port, timeout=server.timeout)
        with smtp:
            if not server.use_ssl and server.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if server.login:
                smtp.login(server.login, server.password or "")
            refused = smtp.send_message(message)
    except (smtplib.SMTPException, OSError) as exc:
        raise DeliveryFailed(_scrub(f"SMTP {server.host}:{server.port}: {type(exc).__name__}: {exc}",
                                    server.password)) from None
    if refused:
        raise DeliveryFailed(f"SMTP {server.host}:{server.port} refused recipient(s) {', '.join(sorted(refused))}")


def post_json(hook: Webhook, body: Mapping[str, Any]) -> int:
    """POST ``body`` as JSON; returns the HTTP status (2xx), else raises :class:`DeliveryFailed`."""
    headers = {"Content-Type": "application/json", "User-Agent": "mirrorflow-alerts", **hook.headers}
    request = urllib.request.Request(hook.url, data=json.dumps(body).encode("utf-8"), headers=headers,
                                     method="POST")
    secrets = (hook.url, *hook.headers.values(), *(v.split()[-1] for v in hook.headers.values() if v.split()))
    try:
        with urllib.request.urlopen(request, timeout=hook.timeout) as response:  # noqa: S310 (http(s) only)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        answer = exc.read(ANSWER_CHARS).decode("utf-8", "replace")
        raise DeliveryFailed(_scrub(f"HTTP {exc.code} {exc.reason}: {answer}", *secrets)) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise DeliveryFailed(_scrub(f"not delivered: {type(exc).__name__}: {reason}", *secrets)) from None
