"""Topic configs read and changed with a bare AdminClient (not the code under test), and a condition waited for.

For the topic-shape and config-sync tests and the level DAGs' config checks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from mirrorflow.kafka.config import ClusterClient
from mirrorflow_dev.kafka import LocalCluster

_pause = threading.Event()  # never set; .wait(t) paces probe loops


def client_of(cluster: LocalCluster) -> ClusterClient:
    return ClusterClient(cluster.name, {"bootstrap.servers": cluster.bootstrap})


def explicit_configs(cluster: LocalCluster, topic: str) -> dict[str, str]:
    """Every config set explicitly on the topic, read with a bare AdminClient (not the code under test)."""
    admin = AdminClient(cluster.client_config())
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=15)[resource].result(timeout=20)
    return {k: e.value for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:.0f}s: {what}"
        _pause.wait(0.05)


def alter(cluster, topic: str, **configs: str) -> None:
    """Change configs the way an operator does, with a bare AdminClient (not the code under test)."""
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin = AdminClient(cluster.client_config())  # kept: a collected client cancels its futures
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
