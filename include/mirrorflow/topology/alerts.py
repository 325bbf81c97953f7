"""Alerts (topology key ``alerts``): who is told when mirroring needs a person, and how.

Optional; without it nothing is sent (a failed task is only a red square in the UI)::

    alerts:
      email:
        conn_id: smtp_default                  # Airflow SMTP connection (default shown)
        to: [kafka-oncall@example.com]
        from_address: mirrorflow@example.com   # default: the connection's extra from_email
        kinds: [lag, gap, truncated, checkpoint, partition, declined, unreachable, audit, task]   # default: all
      webhook:
        conn_id: mirrorflow_alerts_webhook     # Airflow connection holding the URL (default shown)
        format: slack                          # generic (default), slack or pagerduty
        kinds: [gap, truncated, unreachable]
        timeout_seconds: 10
      resolved: true                           # also say when an incident is over (default)
      docs_url: https://git.example.com/mirrorflow/-/blob/main/docs   # where messages link the docs

Secrets never sit here: the SMTP server, its port and login come from the SMTP
connection, the webhook's URL (often a secret itself) and token from the webhook
connection. The kinds of incident, what each means and what to do about it are
in docs/alerts.md; :data:`KINDS` lists them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool, StrictStr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from mirrorflow.topology.base import Model

#: Every kind of incident, in the order docs/alerts.md explains them.
KINDS: tuple[str, ...] = ("lag", "unreachable", "gap", "truncated", "checkpoint", "partition", "declined", "audit",
                          "proofs", "task")
Kind = Literal["lag", "unreachable", "gap", "truncated", "checkpoint", "partition", "declined", "audit", "proofs",
               "task"]

DEFAULT_SMTP_CONN_ID = "smtp_default"
DEFAULT_WEBHOOK_CONN_ID = "mirrorflow_alerts_webhook"
DEFAULT_WEBHOOK_TIMEOUT = 10
WEBHOOK_FORMATS = ("generic", "slack", "pagerduty")

#: Keys that would put a secret (or an address that is one) into the file, with where it belongs instead.
_SECRET_KEYS = {
    "email": ("host", "port", "login", "user", "password"),
    "webhook": ("url", "host", "token", "password", "routing_key", "headers"),
}


def _check_conn_id(value: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise PydanticCustomError("conn_id", "conn_id must be a non-empty Airflow connection id without spaces", {})
    return value


def _check_address(value: str) -> str:
    local, at, domain = value.rpartition("@")
    if not at or not local or not domain or any(ch.isspace() or ch in "<>," for ch in value):
        raise PydanticCustomError("address", "not an e-mail address: '{value}' (one address per entry)",
                                  {"value": value})
    return value


class _Channel(Model):
    #: Kinds of incident this channel hears about; ``None``: every kind.
    kinds: list[Kind] | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, data: Any) -> Any:
        name = cls.__name__.removesuffix("Channel").lower()
        if isinstance(data, dict):
            found = sorted(k for k in data if k in _SECRET_KEYS.get(name, ()))
            if found:
                raise PydanticCustomError(
                    "secret_in_file",
                    "secrets and servers never go in the topology file: put {keys} in the Airflow connection named "
                    "by conn_id (docs/alerts.md)", {"keys": ", ".join(found)})
        return data

    def wants(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds


class EmailChannel(_Channel):
    """E-mail over SMTP: the server, port, login and TLS settings come from an Airflow SMTP connection."""

    conn_id: StrictStr = DEFAULT_SMTP_CONN_ID
    to: list[StrictStr] = Field(min_length=1)
    #: The sender; ``None``: the connection's extra ``from_email``.
    from_address: StrictStr | None = None

    @field_validator("conn_id")
    @classmethod
    def _conn_id(cls, value: str) -> str:
        return _check_conn_id(value)

    @field_validator("to")
    @classmethod
    def _to(cls, value: list[str]) -> list[str]:
        for address in value:
            _check_address(address)
        return value

    @field_validator("from_address")
    @classmethod
    def _from(cls, value: str | None) -> str | None:
        return value if value is None else _check_address(value)


class WebhookChannel(_Channel):
    """A JSON POST to a URL kept in an Airflow connection (Slack, Teams, PagerDuty, anything that takes JSON)."""

    conn_id: StrictStr = DEFAULT_WEBHOOK_CONN_ID
    format: Literal["generic", "slack", "pagerduty"] = "generic"
    timeout_seconds: int = Field(default=DEFAULT_WEBHOOK_TIMEOUT, gt=0, strict=True)

    @field_validator("conn_id")
    @classmethod
    def _conn_id(cls, value: str) -> str:
        return _check_conn_id(value)


class AlertsConfig(Model):
    email: EmailChannel | None = None
    webhook: WebhookChannel | None = None
    #: Also send one message when an incident is over.
    resolved: StrictBool = True
    #: Where the docs are read (a URL of the repository's docs/ folder); messages link ``<docs_url>/alerts.md#kind``.
    docs_url: StrictStr | None = None

    @model_validator(mode="after")
    def _some_channel(self) -> AlertsConfig:
        if self.email is None and self.webhook is None:
            raise PydanticCustomError(
                "no_channel", "give email or webhook (or both): an alerts section without a channel sends nothing", {})
        return self

    def channels(self) -> dict[str, EmailChannel | WebhookChannel]:
        """The configured channels by name (``email``, ``webhook``)."""
        out: dict[str, EmailChannel | WebhookChannel] = {}
        if self.email is not None:
            out["email"] = self.email
        if self.webhook is not None:
            out["webhook"] = self.webhook
        return out

    def kinds_by_channel(self) -> dict[str, frozenset[str]]:
        """Which kinds each channel hears about."""
        return {name: frozenset(k for k in KINDS if channel.wants(k)) for name, channel in self.channels().items()}
