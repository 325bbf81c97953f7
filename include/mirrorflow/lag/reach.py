"""Which clusters one measurement can reach, and their topics: each cluster is asked once.

The metadata request that lists a cluster's topics doubles as its reachability
probe. A cluster that does not answer is remembered with the reason, so nothing
else in the same measurement waits on it again, and its links and groups get a
row that says why they were not measured.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from confluent_kafka import KafkaException

from mirrorflow.kafka import ClusterClient, active, admin_for

# one logger for the whole package: its lines keep the name they had before lag became a package
log = logging.getLogger("mirrorflow.lag")

DEFAULT_TIMEOUT = 10.0

T = TypeVar("T")


def side_by_side(ask: Callable[[str], T], clusters: Iterable[str], what: str) -> dict[str, T]:
    """``ask(cluster)`` for each cluster, in threads of their own when there are several (``what`` names them).

    Each runs in a copy of this context, so a poller's kept clients (mirrorflow.kafka.kept) reach the threads.
    """
    names = sorted(set(clusters))
    if len(names) < 2:
        return {name: ask(name) for name in names}
    with ThreadPoolExecutor(max_workers=min(8, len(names)), thread_name_prefix=f"mirrorflow-lag-{what}") as pool:
        futures = {name: pool.submit(contextvars.copy_context().run, ask, name) for name in names}
        return {name: future.result() for name, future in futures.items()}


class Clusters:
    """Client settings plus what one measurement learned about each cluster: its topics, or why it is down.

    Each cluster is asked for its metadata once (in parallel, bounded by
    ``timeout``); a cluster that does not answer is remembered as unreachable
    so that nothing else waits on it again during the measurement.
    """

    def __init__(self, clients: Mapping[str, ClusterClient], unavailable: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.clients = dict(clients)
        self.timeout = timeout
        self._down: dict[str, str] = dict(unavailable or {})
        self._topics: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, clients: Mapping[str, ClusterClient] | Clusters, timeout: float = DEFAULT_TIMEOUT) -> Clusters:
        return clients if isinstance(clients, Clusters) else cls(clients, timeout=timeout)

    def probe(self, names: Iterable[str]) -> None:
        """Fetch the metadata of every named cluster at once, so unreachable ones cost one timeout in total."""
        side_by_side(self.down, (n for n in names if n not in self._down and n not in self._topics), "probe")

    def down(self, name: str) -> str | None:
        """Why ``name`` cannot be measured (``"is unreachable at ..."``), or ``None`` when it answered.

        Unlike :func:`mirrorflow.kafka.admin.list_topics`, a topic whose metadata
        carries an error is left out with a warning rather than failing the cluster.
        """
        if name in self._down:
            return self._down[name]
        if name in self._topics:
            return None
        client = self.clients.get(name)
        if client is None:
            return self._mark(name, "has no client settings")
        admin_client = admin_for(client)  # a poller's kept client, or a fresh one
        try:
            metadata = admin_client.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            err = exc.args[0]
            if (kept := active()) is not None:
                kept.drop(admin_client, err.name())
            return self._mark(name, f"is unreachable at {client.bootstrap}: {err.name()}: {err.str()}")
        topics = {logical: len(m.partitions) for t, m in metadata.topics.items()  # by logical name; a topic
                  if m.error is None and (logical := client.logical(t)) is not None}  # outside its names: not ours
        for t, m in metadata.topics.items():
            if m.error is not None:
                log.warning("cluster %s: topic %s left out of the lag measurement: %s", name, t, m.error)
        with self._lock:
            self._topics[name] = topics
        return None

    def _mark(self, name: str, reason: str) -> str:
        log.warning("cluster %s: %s", name, reason)
        with self._lock:
            self._down[name] = reason
        return reason

    def topics(self, name: str) -> dict[str, int]:
        """Logical topic -> partition count of a cluster that answered (call :meth:`down` first)."""
        return self._topics[name]

    @property
    def unreachable(self) -> dict[str, str]:
        return dict(sorted(self._down.items()))
