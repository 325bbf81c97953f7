"""Which client settings are secrets, and the values this process has seen: one rule for validation and redaction.

The topology file refuses secret keys (they belong in an Airflow connection), the
``repr`` of client settings hides them, and journal lines redact them by key. Keys
are not enough: a secret can also travel inside a value, an error string or a
library's message. So every process remembers the secret values it is handed
(:func:`remember`, called for every cluster client it builds) and :func:`scrub`
takes them out of any text: journal lines, and the log records of the Spark jobs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

# Settings that carry a secret without saying "password" or "secret".
SECRET_CONFIG_KEYS = frozenset({"ssl.key.pem", "sasl.jaas.config", "sasl.oauthbearer.config",
                                "basic.auth.user.info", "aws_session_token"})

#: Shorter values are not scrubbed: they would match ordinary text (and are no secret worth the name).
MIN_SECRET_LENGTH = 6
REDACTED = "***"

_known: set[str] = set()
_lock = threading.Lock()


def is_secret_config(key: str) -> bool:
    lowered = key.lower()
    return lowered in SECRET_CONFIG_KEYS or "password" in lowered or "secret" in lowered


def secret_values(settings: Mapping[str, Any]) -> list[str]:
    """The secret values of ``settings``, and of a PEM key also each line of its body (logs cut lines apart)."""
    out: list[str] = []
    for key, value in settings.items():
        if not (is_secret_config(str(key)) and isinstance(value, str)):
            continue
        out.append(value)
        if "-----BEGIN" in value:
            out += [line.strip() for line in value.splitlines() if line.strip() and "-----" not in line]
        if str(key).lower() == "basic.auth.user.info" and ":" in value:
            out.append(value.split(":", 1)[1])
    return [v for v in out if len(v) >= MIN_SECRET_LENGTH]


def remember(settings: Mapping[str, Any]) -> None:
    """Remember the secret values of ``settings`` so that :func:`scrub` takes them out of any text."""
    found = secret_values(settings)
    if found:
        with _lock:
            _known.update(found)


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every remembered secret value (and ``extra``) replaced by ``***``."""
    with _lock:
        known = sorted({*_known, *(e for e in extra if len(e) >= MIN_SECRET_LENGTH)}, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


class ScrubFilter(logging.Filter):
    """A handler filter that scrubs remembered secrets out of every record it passes on."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
