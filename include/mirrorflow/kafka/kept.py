"""Clients a long-lived poller keeps between its polls: one admin client per cluster login, one consumer per group.

The ``on_data`` watcher measures its level every second. With a fresh client per
question, each poll opened an admin client per cluster, another per source and a
consumer per link: under SASL_SSL that is a TLS and an authentication handshake
each, tens per second per level, and managed Kafka throttles connection rates.
Inside :meth:`KeptClients.active`, :func:`mirrorflow.kafka.shared.admin_for` and
:func:`mirrorflow.kafka.admin.committed_offsets` take their clients from here, so an
idle watcher opens no connection at all once it has started (docs/levels.md).

- A client is keyed by its cluster's name and its whole settings, hashed (they hold
  credentials): a rotated password or a changed address gets a new client.
- A client whose call failed as a whole is dropped (:meth:`drop`); the next poll
  makes a new one, so a watcher recovers from a client stuck in a bad state.
  librdkafka itself reconnects a kept client after a broker restart.
- :meth:`retain_used` closes the clients the last measurement did not use (a
  cluster or link gone from the topology, old settings).

It is a context variable, not a global: other code in the same process (other
triggers, a task) keeps its fresh clients. ``opened`` counts every client made,
for the tests and the benchmark.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from mirrorflow.kafka.config import ClusterClient

log = logging.getLogger(__name__)

_ACTIVE: contextvars.ContextVar[KeptClients | None] = contextvars.ContextVar("mirrorflow_kept_clients",
                                                                               default=None)


def settings_key(client: ClusterClient) -> tuple[str, str]:
    """The cluster's name and a hash of its whole settings: two logins to one cluster never share a client."""
    settings = repr(sorted((str(k), repr(v)) for k, v in client.settings.items()))
    return client.name, hashlib.sha256(settings.encode()).hexdigest()


def active() -> KeptClients | None:
    """The kept clients of the measurement running in this context, if any."""
    return _ACTIVE.get()


class KeptClients:
    """One poller's clients, kept across its polls (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._admins: dict[tuple[str, str], AdminClient] = {}
        self._consumers: dict[tuple[str, str, str], Consumer] = {}
        self._used: set[tuple[str, ...]] = set()
        #: Clients made so far (admin clients and consumers).
        self.opened = 0
        #: Clients dropped after a failed call.
        self.dropped = 0

    @contextmanager
    def active(self) -> Iterator[KeptClients]:
        """Within (this thread, and threads started with a copy of its context): calls use these clients."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def admin(self, client: ClusterClient) -> AdminClient:
        key = settings_key(client)
        with self._lock:
            self._used.add(key)
            kept = self._admins.get(key)
            if kept is None:
                kept = self._admins[key] = AdminClient(client.admin())
                self.opened += 1
            return kept

    def consumer(self, client: ClusterClient, group: str) -> Consumer:
        key = (*settings_key(client), group)
        with self._lock:
            self._used.add(key)
            kept = self._consumers.get(key)
            if kept is None:
                kept = self._consumers[key] = Consumer(client.consumer(group))
                self.opened += 1
            return kept

    def drop(self, handle: Any, why: str = "") -> None:
        """Stop keeping ``handle`` (a call on it failed or was abandoned); the next use makes a new client."""
        with self._lock:
            admins = [k for k, v in self._admins.items() if v is handle]
            consumers = [k for k, v in self._consumers.items() if v is handle]
            for k in admins:
                del self._admins[k]
            for c in consumers:
                del self._consumers[c]
        if admins or consumers:
            self.dropped += 1
            name = (admins or consumers)[0][0]
            log.info("cluster %s: a kept client is replaced at its next use%s", name, f" ({why})" if why else "")
        for _ in consumers:
            _close(handle)

    def retain_used(self) -> None:
        """Close the clients not used since the last call (gone from the topology, or with old settings)."""
        with self._lock:
            stale_admins = [k for k in self._admins if k not in self._used]
            stale = [self._consumers.pop(k) for k in [k for k in self._consumers if k not in self._used]]
            for k in stale_admins:
                del self._admins[k]
            self._used = set()
        for consumer in stale:
            _close(consumer)

    def close(self) -> None:
        """Close every kept client (the poller ends)."""
        with self._lock:
            consumers = list(self._consumers.values())
            self._admins.clear()
            self._consumers.clear()
        for consumer in consumers:
            _close(consumer)

    @property
    def count(self) -> int:
        """Clients kept now."""
        with self._lock:
            return len(self._admins) + len(self._consumers)


def _close(consumer: Any) -> None:
    try:
        consumer.close()
    except Exception as exc:  # closing a consumer of a cluster that is gone: nothing to keep anyway
        log.debug("closing a kept consumer failed: %s: %s", type(exc).__name__, exc)
