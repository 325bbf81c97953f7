"""Tell Airflow's log masker about every secret mirrorflow reads from a connection.

Airflow masks a connection's password, and extra keys whose names sound
secret, in task logs. A Kafka connection's secrets live in its extra under
librdkafka's names (``sasl.password``, ``ssl.key.pem``), and a PEM key is logged
line by line if at all, so each hook hands its secret values to
:func:`airflow.sdk.log.mask_secret` as well: the task log and the supervisor's
output show ``***`` wherever one would appear (librdkafka's own messages included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk.log import mask_secret

from mirrorflow.secrets import remember, secret_values


def mask_settings(settings: Mapping[str, Any]) -> None:
    """Mask the secret values of client settings in task logs (and scrub them from journal lines)."""
    remember(settings)
    mask_values(secret_values(settings))


def mask_values(values: Iterable[str | None]) -> None:
    for value in values:
        if value:
            mask_secret(value)
