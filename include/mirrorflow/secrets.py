"""Which client settings are secrets: one rule for validation, redaction and audit.

The topology file refuses them (they belong in an Airflow connection), the
``repr`` of client settings hides them, and audit lines redact them.
"""

from __future__ import annotations

# librdkafka settings that carry a secret without saying "password" or "secret".
SECRET_CONFIG_KEYS = frozenset({"ssl.key.pem", "sasl.jaas.config", "sasl.oauthbearer.config"})


def is_secret_config(key: str) -> bool:
    lowered = key.lower()
    return lowered in SECRET_CONFIG_KEYS or "password" in lowered or "secret" in lowered
