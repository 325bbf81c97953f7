"""Mirrored data as named things users' pipelines can wait for: asset URIs and what each event says. Pure.

Two kinds, per cluster and topic (docs/assets.md):

- **arrived**: ``kafka://<bootstrap>/<topic>``, the Kafka provider's own scheme (its
  host is the first address of the cluster's ``bootstrap.servers``, as the
  topology or the connection writes it). A level run, a backfill or a restore
  that brought records of the topic to the cluster says so, with how far each
  partition now reaches (:func:`arrivals`);
- **proven**: ``mirrorflow-proven://<cluster>/<topic>``, one event per window the
  completeness audit proves complete there, the window's start as the event's
  partition key (:mod:`mirrorflow.completeness.proven`).

The Airflow side (``mirrorflow_airflow.assets``) turns these into Airflow assets
and events; nothing here imports Airflow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorflow.naming import NameFormat

#: The scheme of the proven-window assets (the arrived ones use the Kafka provider's ``kafka``).
PROVEN_SCHEME = "mirrorflow-proven"


def first_address(bootstrap_servers: str) -> str:
    """The first ``host:port`` of a ``bootstrap.servers`` list (a scheme such as ``SASL_SSL://`` dropped)."""
    first = bootstrap_servers.split(",")[0].strip()
    return first.split("://", 1)[-1]


def arrival_uri(bootstrap_servers: str, topic: str) -> str:
    """The asset URI of ``topic`` on the cluster at ``bootstrap_servers``, in the Kafka provider's scheme."""
    address = first_address(bootstrap_servers)
    if not address or not topic:
        raise ValueError(f"an arrival asset needs a bootstrap address and a topic, got {bootstrap_servers!r}, "
                         f"{topic!r}")
    return f"kafka://{address}/{topic}"


def proven_uri(cluster: str, topic: str) -> str:
    """The asset URI of the windows of ``topic`` proven complete on ``cluster``."""
    return f"{PROVEN_SCHEME}://{cluster}/{topic}"


@dataclass(frozen=True)
class Arrival:
    """Records of ``topic`` reached ``cluster`` in one run: the asset event's URI and its extra."""

    cluster: str
    topic: str
    uri: str
    extra: Mapping[str, Any] = field(default_factory=dict)


def arrivals(partitions: Iterable[Mapping[str, Any]], bootstraps: Mapping[str, str], *,
             run_id: str = "", by: str = "level", names: Mapping[str, NameFormat] | None = None) -> list[Arrival]:
    """One arrival per target cluster and topic that got records from ``partitions`` (copy results as dicts).

    ``bootstraps``: cluster -> its ``bootstrap.servers``; a cluster missing there is
    left out. ``names``: the topic format of each cluster that renames: its URI names
    the topic as the cluster does, its extra the logical name (``topic``). The extra
    names the run and, per partition, the next source offset the copy reached, the
    target's offset after the last copy and the newest record timestamp committed
    (epoch ms), so a consumer knows how far the data reaches.
    """
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for p in partitions:
        if not (p.get("copied") or p.get("restored")) or p["target"] not in bootstraps:
            continue
        entry = grouped.setdefault((p["target"], p["topic"]), {"run_id": run_id, "by": by, "links": set(),
                                                               "records": 0, "partitions": {}})
        entry["links"].add(p["link_id"])
        entry["records"] += int(p.get("copied") or 0)
        entry["partitions"][str(p["partition"])] = {
            "source": p["source"], "source_offset": p["next_offset"],
            "target_offset": p["target_last_offset"] + 1 if p.get("target_last_offset") is not None else None,
            "newest_ms": p.get("newest_ms")}
    names = names or {}
    return [Arrival(cluster, topic, arrival_uri(bootstraps[cluster], names[cluster].render(topic)
                                                if cluster in names else topic),
                    {**entry, "links": sorted(entry["links"]), **({"topic": topic} if cluster in names else {})})
            for (cluster, topic), entry in sorted(grouped.items())]
