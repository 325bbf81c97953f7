"""Admin clients shared for a while: one per cluster inside a :func:`sharing_admins` scope.

A fresh ``AdminClient`` connects and asks for the broker's API versions and
metadata before it answers anything: tens of milliseconds on loopback, more
across a network. Planning a level run asks about a dozen questions of the same
two clusters, each through a new client, and that was most of its time
(docs/benchmarks.md, "What a level run spends besides copying"). Inside the
scope, :func:`admin_for` hands every caller and thread the same client for
the same cluster settings (librdkafka's handles are thread-safe); outside it, a
fresh client as before, so long-lived processes hold no connections between runs.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka.admin import AdminClient

from mirrorflow.kafka.config import ClusterClient
from mirrorflow.kafka.kept import active

_lock = threading.Lock()
_scopes = 0
_kept: dict[tuple[str, str], AdminClient] = {}


def _key(client: ClusterClient) -> tuple[str, str]:
    # The whole settings, hashed (they hold credentials): two logins to one cluster never share a client.
    settings = repr(sorted((str(k), repr(v)) for k, v in client.settings.items()))
    return client.name, hashlib.sha256(settings.encode()).hexdigest()


def admin_for(client: ClusterClient) -> AdminClient:
    """The cluster's admin client: the scope's shared one, or a fresh one outside any scope.

    Callers keep a reference until their futures are done (a collected client cancels them).
    A poller's kept clients (:mod:`mirrorflow.kafka.kept`), when active, come first.
    """
    kept = active()
    if kept is not None:
        return kept.admin(client)
    with _lock:
        if _scopes == 0:
            return AdminClient(client.admin())
        key = _key(client)
        kept = _kept.get(key)
        if kept is None:
            kept = _kept[key] = AdminClient(client.admin())
        return kept


def adopt(client: ClusterClient, admin: AdminClient) -> None:
    """Share ``admin`` for the cluster, when a scope is open and holds none yet: it has connected already.

    A probe's client is the first to reach a cluster in a plan; kept, the plan's
    questions reuse its connection instead of opening another (three round trips
    more to a far cluster: connect, API versions, metadata).
    """
    if active() is not None:
        return
    with _lock:
        if _scopes > 0:
            _kept.setdefault(_key(client), admin)


def discard(admin: AdminClient) -> None:
    """Stop sharing ``admin``: a call on it was abandoned (``kafka.deadline.CallAbandoned``) and may still run."""
    kept = active()
    if kept is not None:
        kept.drop(admin, "a call on it was abandoned")
    with _lock:
        for key in [k for k, v in _kept.items() if v is admin]:
            del _kept[key]


@contextmanager
def sharing_admins() -> Iterator[None]:
    """Within: one admin client per cluster for every call, in every thread; dropped when the last scope ends."""
    global _scopes
    with _lock:
        _scopes += 1
    try:
        yield
    finally:
        with _lock:
            _scopes -= 1
            if _scopes == 0:
                _kept.clear()


def shared_count() -> int:
    """How many admin clients the open scopes share now (0 outside every scope)."""
    with _lock:
        return len(_kept)
