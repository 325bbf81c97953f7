"""Whose ACLs: the Kafka principal of mirrorflow's connection to each cluster, where it can be known.

The settings tell it for SCRAM, PLAIN and client certificates
(:func:`mirrorflow.kafka.principal.principal_of`); brokers with their own mapping
rules, Kerberos and OAuth need it given explicitly (``--principal``).

The core never reads Airflow's connection store; an ``AIRFLOW_CONN_<ID>``
variable in JSON form is plain text in the environment and is read here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from mirrorflow.kafka import principal_of
from mirrorflow.topology import Topology


def connection_settings(conn_id: str, environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The extra (librdkafka settings) of ``AIRFLOW_CONN_<CONN_ID>`` in JSON form, if it is set."""
    raw = (environ if environ is not None else os.environ).get(f"AIRFLOW_CONN_{conn_id.upper()}")
    if not raw or not raw.lstrip().startswith("{"):
        return None
    try:
        conn = json.loads(raw)
        extra = conn.get("extra") or {}
        return dict(json.loads(extra) if isinstance(extra, str) else extra)
    except (ValueError, AttributeError):
        return None


def principals(topology: Topology, given: str | None = None,
               environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """Each cluster's principal: ``given`` for all, else from its connection or file settings where known."""
    out: dict[str, str | None] = {}
    for name, cluster in topology.clusters.items():
        if given:
            out[name] = given if ":" in given else f"User:{given}"
            continue
        settings: dict[str, Any] = {}
        if cluster.conn_id:
            found = connection_settings(cluster.conn_id, environ)
            if found is None:
                out[name] = None
                continue
            settings.update(found)
        settings.update(dict(cluster.config or {}))
        out[name] = principal_of(settings)
    return out


def bootstrap_of(topology: Topology, cluster: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The cluster's bootstrap address, from the file or its connection (``None`` when unknown)."""
    cfg = topology.clusters[cluster]
    if cfg.bootstrap:
        return cfg.bootstrap
    settings = connection_settings(cfg.conn_id, environ) if cfg.conn_id else None
    return str(settings["bootstrap.servers"]) if settings and settings.get("bootstrap.servers") else None
