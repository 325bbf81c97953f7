"""The journal: one JSON line for each thing mirrorflow did, the record operators keep.

Every copy, offset commit, schema write and failover writes one JSON object on a
single line to the journal's logger. Task logs are the record operators keep, so
the lines must be machine-parseable (one ``json.loads`` per line, after the log
prefix) and must never carry secrets.

These are *journal lines* (:func:`journal_entry`, :func:`journal_warning`, rendered
by :func:`journal_line`); in this project "audit" means the completeness audit
alone (:mod:`mirrorflow.completeness`, the DAG ``mirror_audit``). Two identifiers
keep their first names because users' log pipelines select the lines by them: the
logger ``mirrorflow.audit`` and the key ``"audit": "mirrorflow"`` of every line
(docs/architecture.md, "Journal lines").
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from mirrorflow.secrets import is_secret_config, scrub

JOURNAL_LOGGER = "mirrorflow.audit"
_log = logging.getLogger(JOURNAL_LOGGER)

# Journal fields are free-form, so beyond client secrets redact anything that
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


def journal_line(event: str, **fields: Any) -> str:
    """Render one journal entry as a compact, key-sorted JSON line."""
    record = {"audit": "mirrorflow", "event": event, "at": datetime.now(UTC).isoformat()}
    record.update(_redact(fields))
    # by key above; by value here: a secret inside an error string or a library's message
    return scrub(json.dumps(record, sort_keys=True, default=str, separators=(",", ":")))


def journal_entry(event: str, **fields: Any) -> dict[str, Any]:
    """Log one journal line and return the entry (handy for task return values)."""
    return _emit(logging.INFO, event, fields)


def journal_warning(event: str, **fields: Any) -> dict[str, Any]:
    """Log one journal line at WARNING: something was lost or refused, and a person should look."""
    return _emit(logging.WARNING, event, fields)


def _emit(level: int, event: str, fields: dict[str, Any]) -> dict[str, Any]:
    line = journal_line(event, **fields)
    _log.log(level, line)
    return json.loads(line)
