"""The owners' side of shaping a target: each owner's topic configs read once per plan, and the records.

:func:`mirrorflow.cluster_sync.shape_sync.sync_topic_shapes` asks a :class:`ConfigOwners` for
the owners' shapes of the topics it shapes (:class:`~mirrorflow.cluster_sync.shape_plan.OwnedConfigs`),
for the target's records when a follower differs from its owner, and to remember
what it applied. An owner that cannot be read leaves its topics' configs as they
are for this run, said once in the log; the copy goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from mirrorflow.cluster_sync.config_memory import read_records, write_records
from mirrorflow.cluster_sync.ownership import ConfigOwnership
from mirrorflow.cluster_sync.shape_plan import OwnedConfigs
from mirrorflow.errors import MirrorflowError
from mirrorflow.kafka import ClusterClient, TopicShape, describe_logical

log = logging.getLogger(__name__)


class ConfigOwners:
    """Whose configs each topic follows, read from the owners at most once per topic (one plan's worth)."""

    def __init__(self, ownership: ConfigOwnership, clients: Mapping[str, ClusterClient],
                 timeout: float = 30.0, unread: Mapping[str, str] | None = None) -> None:
        """``unread``: owners known to be out of reach (why), whose configs are not asked for."""
        self.ownership = ownership
        self._clients = dict(clients)
        self._timeout = timeout
        self._lock = threading.Lock()
        self._asked: dict[str, set[str]] = {}  # owner -> topics described (present or not)
        self._shapes: dict[str, dict[str, TopicShape]] = {}  # owner -> topic -> shape
        self._unread: dict[str, str] = dict(unread or {})  # owner -> why its configs are not read this time
        self._said: set[str] = set()
        self._records: dict[str, dict[str, dict[str, Any]]] = {}  # target -> what the sync last saw there

    def owned(self, target: str, topics: Iterable[str], records: Mapping[str, Any] | None = None) -> OwnedConfigs:
        """The owners' shapes of ``topics`` (those whose owner is not ``target`` and has them)."""
        by_owner: dict[str, list[str]] = {}
        for topic in topics:
            owner = self.ownership.owner_of(topic)
            if owner != target:
                by_owner.setdefault(owner, []).append(topic)
        shapes: dict[str, TopicShape] = {}
        with self._lock:
            for owner, wanted in sorted(by_owner.items()):
                shapes.update({t: s for t, s in self._read(owner, wanted).items() if t in wanted})
        return OwnedConfigs(self.ownership, target, shapes, records)

    def _read(self, owner: str, topics: list[str]) -> dict[str, TopicShape]:
        missing = sorted(set(topics) - self._asked.get(owner, set()))
        if missing and owner not in self._unread:
            client = self._clients.get(owner)
            try:
                if client is None:
                    raise MirrorflowError(f"no client settings for cluster {owner}")
                self._shapes.setdefault(owner, {}).update(describe_logical(client, missing, self._timeout))
                self._asked.setdefault(owner, set()).update(missing)
            except MirrorflowError as exc:
                self._unread[owner] = str(exc)
        if owner in self._unread:
            if owner not in self._said:
                self._said.add(owner)
                log.warning("topic configs owned by %s are not synced in this run (left as they are on every "
                            "follower): %s", owner, self._unread[owner])
            return {}
        return self._shapes.get(owner, {})

    def records(self, client: ClusterClient) -> dict[str, dict[str, Any]] | None:
        """What mirrorflow remembers of ``client``'s topics; ``None`` (said) when it cannot be read.

        Read once per target and plan (several links of a level share a target), and kept
        up to date by :meth:`remember`.
        """
        with self._lock:
            if client.name in self._records:
                return dict(self._records[client.name])
        try:
            found = read_records(client, self._timeout)
        except MirrorflowError as exc:
            log.warning("cluster %s: cannot read what the config sync last saw of its topics (%s): a config that "
                        "differs from its owner is only reported in this run, nothing is changed", client.name, exc)
            return None
        with self._lock:
            self._records[client.name] = dict(found)
        return found

    def remember(self, client: ClusterClient, records: Mapping[str, Mapping[str, Any]]) -> None:
        """Write ``records`` on ``client``; a failure is an error in the log, never a failed copy."""
        try:
            write_records(client, records, self._timeout)
        except MirrorflowError as exc:
            with self._lock:
                self._records.pop(client.name, None)  # not known any more: the next link reads it again
            log.error("cluster %s: the topic configs just applied could not be remembered (%s): the next "
                      "change on their owner may be taken for the follower's own value there (and, if it keeps "
                      "less, declined)", client.name, exc)
            return
        with self._lock:
            if client.name in self._records:
                self._records[client.name].update({t: dict(r) for t, r in records.items()})
