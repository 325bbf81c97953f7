"""What the config sync last saw of each topic on a cluster: ``_mirrorflow.topic-configs``.

A follower's config that differs from its owner's was either changed by the owner
(the follower still holds the owner's value of last time) or is the follower's
own; only a record tells them apart (:mod:`mirrorflow.cluster_sync.ownership`), and
without one the sync could shorten a follower's own retention. The record lives on
the follower itself, in a compacted one-partition topic keyed by topic name, so it
needs nothing besides Kafka, survives any Airflow worker and travels with the
cluster's ACLs. It is read once per target and run, and written only when a
record changes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from mirrorflow import formats
from mirrorflow.errors import KafkaOperationError
from mirrorflow.internal_names import TOPIC_CONFIGS_READER_GROUP, TOPIC_CONFIGS_TOPIC
from mirrorflow.kafka import ClusterClient, NotAuthorized, ensure_compacted, read_whole, write_all

log = logging.getLogger(__name__)

#: Compacted: the newest record of each topic is the memory.
TOPIC_CONFIG = {"cleanup.policy": "compact"}
#: The records' format (``"v"``; mirrorflow.formats).
FORMAT = formats.FORMATS["topic-configs"].version


def read_records(client: ClusterClient, timeout: float = 30.0) -> dict[str, dict[str, Any]]:
    """Topic -> its newest record on this cluster; a record mirrorflow cannot read is skipped, named."""
    records: dict[str, dict[str, Any]] = {}
    for msg in read_whole(client, client.own(TOPIC_CONFIGS_TOPIC), TOPIC_CONFIGS_READER_GROUP, timeout):
        key = (msg.key() or b"").decode("utf-8", "replace")
        if msg.value() is None:
            records.pop(key, None)
            continue
        try:
            value = json.loads(msg.value())
            if not isinstance(value, dict) or not isinstance(value.get("applied"), dict):
                raise ValueError("not a record of applied configs")
            # format 1 before it was marked (0.1.0); a newer one stops the sync by name, never read as this one
            formats.check_record("topic-configs", value, f"topic {client.own(TOPIC_CONFIGS_TOPIC)} on "
                                                        f"{client.name}, key {key}", missing=1)
            value.pop("v", None)
        except ValueError as exc:
            log.warning("%s %s@%d (topic %s): %s; skipped", client.name, client.own(TOPIC_CONFIGS_TOPIC), msg.offset(),
                        key, exc)
            continue
        records[key] = value
    return records


def write_records(client: ClusterClient, records: Mapping[str, Mapping[str, Any]], timeout: float = 30.0) -> int:
    """Remember ``records`` (topic -> record) on this cluster; creates the topic the first time."""
    if not records:
        return 0
    ensure_compacted(client, client.own(TOPIC_CONFIGS_TOPIC), TOPIC_CONFIG, timeout)
    try:
        return write_all(client, client.own(TOPIC_CONFIGS_TOPIC),
                         ((topic.encode(), json.dumps({**record, "v": FORMAT}, sort_keys=True).encode())
                          for topic, record in sorted(records.items())), timeout=timeout)
    except NotAuthorized:
        raise  # names the ACL already
    except KafkaOperationError as exc:
        raise KafkaOperationError(client.name, f"remember applied topic configs in {client.own(TOPIC_CONFIGS_TOPIC)}",
                                  exc.error) from exc
