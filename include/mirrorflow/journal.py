"""The journal: one JSON line for each thing mirrorflow did, the record operators keep.

Every copy, offset commit, schema write and failover writes one JSON object on a
single line to the ``mirrorflow.audit`` logger. Task logs are the audit record
operators keep, so the lines must be machine-parseable (one ``json.loads`` per
line, after the log prefix) and must never carry secrets.

The docs call these lines *audit lines*, and users' log pipelines select them by
the logger name ``mirrorflow.audit`` and the key ``"audit": "mirrorflow"``
(docs/levels.md, docs/topics.md): both stay as they are, and so do the names of
:func:`audit`, :func:`audit_warning` and :func:`audit_line`, which write and
render one. Only this module is named otherwise, so that in the code a bare
"audit" is the completeness audit (:mod:`mirrorflow.completeness`, the DAG
``mirror_audit``).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from mirrorflow.secrets import is_secret_config, scrub

AUDIT_LOGGER = "mirrorflow.audit"
_log = logging.getLogger(AUDIT_LOGGER)

# Audit fields are free-form, so beyond client secrets redact anything that
# sounds like a credential.
_EXTRA_HINTS = ("sasl.", "ssl.key", "token", "credential")


def _redact(value: Any, key: str = "") -> Any:
    if is_secret_config(key) or any(hint in key.lower() for hint in _EXTRA_HINTS):
        return "***"
    if isinstance(value, dict):
        return {k: _redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v) for v in value]
    return value


def audit_line(event: str, **fields: Any) -> str:
    """Render one audit record as a compact, key-sorted JSON line."""
    record = {"audit": "mirrorflow", "event": event, "at": datetime.now(UTC).isoformat()}
    record.update(_redact(fields))
    # by key above; by value here: a secret inside an error string or a library's message
    return scrub(json.dumps(record, sort_keys=True, default=str, separators=(",", ":")))


def audit(event: str, **fields: Any) -> dict[str, Any]:
    """Log one audit line and return the record (handy for task return values)."""
    return _emit(logging.INFO, event, fields)


def audit_warning(event: str, **fields: Any) -> dict[str, Any]:
    """Log one audit line at WARNING: something was lost or refused, and a person should look."""
    return _emit(logging.WARNING, event, fields)


def _emit(level: int, event: str, fields: dict[str, Any]) -> dict[str, Any]:
    line = audit_line(event, **fields)
    _log.log(level, line)
    return json.loads(line)
