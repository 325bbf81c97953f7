"""The alert channels' connections: the SMTP server of the e-mail channel, the endpoint of the webhook.

Both channels name an Airflow connection in the topology (``alerts.email.conn_id``,
``alerts.webhook.conn_id``; docs/alerts.md). A hook reads it when the notifier
is about to send, once per callback, and turns it into what the core's senders
take (:class:`mirrorflow.alerts.SmtpServer`, :class:`mirrorflow.alerts.Webhook`).
Every secret it reads (password, token, routing key, webhook URL, header values)
is handed to Airflow's log masker first.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from mirrorflow import alerts
from mirrorflow.errors import MirrorflowError
from mirrorflow.topology.alerts import EmailChannel, WebhookChannel
from mirrorflow_airflow.hooks.masking import mask_values


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")


class AlertEmailHook(BaseHook):
    """The e-mail channel's SMTP server, from its connection (the SMTP provider's extras: ``disable_ssl``, ...)."""

    conn_name_attr = "smtp_conn_id"
    hook_name = "mirrorflow alert e-mail"

    def __init__(self, channel: EmailChannel) -> None:
        super().__init__()
        self.channel = channel

    def server(self) -> alerts.SmtpServer:
        conn_id = self.channel.conn_id
        conn = self.get_connection(conn_id)
        extra = conn.extra_dejson
        mask_values([conn.password])
        if not conn.host:
            raise MirrorflowError(f"alerts.email.conn_id: connection {conn_id!r} has no host (the SMTP server)")
        use_ssl = not _flag(extra.get("disable_ssl", False))
        starttls = not _flag(extra.get("disable_tls", False))
        port = conn.port or (465 if use_ssl else 587 if starttls else 25)
        return alerts.SmtpServer(conn.host, int(port), conn.login or None, conn.password or None, use_ssl=use_ssl,
                                 starttls=starttls, timeout=float(extra.get("timeout", 30)),
                                 sender=extra.get("from_email"))

    def get_conn(self) -> alerts.SmtpServer:  # BaseHook's interface
        return self.server()


class AlertWebhookHook(BaseHook):
    """The webhook channel's endpoint, from its connection, and for ``format: pagerduty`` its routing key."""

    conn_name_attr = "http_conn_id"
    hook_name = "mirrorflow alert webhook"

    def __init__(self, channel: WebhookChannel) -> None:
        super().__init__()
        self.channel = channel

    def endpoint(self) -> tuple[alerts.Webhook, str | None]:
        """The webhook to POST to and the routing key (``None`` unless ``format: pagerduty``).

        The URL is the extra's ``url``, else built from the connection: a host that is
        a whole URL, or scheme (``schema`` when it is http/https, else the conn type
        when it is, else https), host and port; the path is the extra's ``path`` (or
        ``endpoint``), else ``schema`` when it is not a scheme (a connection given as
        the URI ``https://hooks.example.com/services/T/B/X`` keeps its path there).
        The password is sent as a bearer token, or is PagerDuty's routing key; the
        extra's ``headers`` are added as they are.
        """
        channel = self.channel
        conn = self.get_connection(channel.conn_id)
        extra = conn.extra_dejson
        schema = conn.schema or ""
        scheme_in_schema = schema.lower() in ("http", "https")
        url = extra.get("url") or extra.get("webhook_url")
        if not url:
            host = (conn.host or "").rstrip("/")
            if not host:
                raise MirrorflowError(f"alerts.webhook.conn_id: connection {channel.conn_id!r} has no host and no url "
                                      f"in its extra")
            if "://" in host:
                base = host
            else:
                conn_type = (conn.conn_type or "").lower()
                scheme = (schema.lower() if scheme_in_schema else conn_type if conn_type in ("http", "https")
                          else "https")
                base = f"{scheme}://{host}{f':{conn.port}' if conn.port else ''}"
            path = extra.get("path") or extra.get("endpoint") or ("" if scheme_in_schema else schema)
            url = f"{base}/{str(path).lstrip('/')}" if path else base
        headers = {str(k): str(v) for k, v in dict(extra.get("headers") or {}).items()}
        routing_key = None
        if channel.format == "pagerduty":
            routing_key = extra.get("routing_key") or conn.password
        elif conn.password:
            headers["Authorization"] = f"Bearer {conn.password}"
        mask_values([url, conn.password, routing_key, *headers.values()])
        return alerts.Webhook(str(url), headers, float(channel.timeout_seconds)), routing_key

    def get_conn(self) -> tuple[alerts.Webhook, str | None]:  # BaseHook's interface
        return self.endpoint()
