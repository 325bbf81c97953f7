"""Whose topic configs win, and what becomes of a follower's value that differs from the owner's.

In a tree every cluster writes the same topics, so "give the target the source's
configs" would let two clusters overwrite each other run after run. Instead one
cluster **owns** each topic's travelling configs (topology key ``topic_configs``;
by default the first cluster listed): every other cluster follows it, and nothing
a follower sets ever travels on. Nothing can flip back and forth, because only
one cluster's values are ever copied.

A follower's value that differs from the owner's has one of two histories, told
apart by what mirrorflow last applied there (its record, kept on the follower by
:mod:`mirrorflow.kafka.config_memory`):

- the follower still holds what mirrorflow applied: **the owner changed**, and the
  owner's value is applied;
- it holds something else, or there is no record and it sets the key itself:
  **changed locally**, and the policy decides: the owner's value overwrites it (``overwrite``, the default), it
  is kept (``keep_target``), or it is left and reported every run (``report_only``).

Under ``overwrite`` the owner's value wins whatever the history, so no record is
kept at all (a verdict then says only that the values differ).

:func:`decide` is pure and each verdict explains itself, as :mod:`mirrorflow.copyflags` does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

#: Topic configs that belong to the topic's data and travel from source to target
#: (all exist in Kafka 4.3; ``message.timestamp.difference.max.ms`` was removed in 4.0
#: and its successors ``message.timestamp.before/after.max.ms`` are here instead).
#: Everything else stays with each cluster: ``replication.factor``, ``min.insync.replicas``,
#: ``unclean.leader.election.enable``, the replication throttles, replica placement,
#: tiered storage (``remote.storage.enable``, ``local.retention.*``), flushing, index and
#: preallocation tuning, ``segment.jitter.ms``.
TRAVELLING_CONFIGS: frozenset[str] = frozenset({
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
    "segment.bytes",
    "segment.ms",
    "compression.type",
    # The level goes with the codec it tunes (Kafka 3.8+, KIP-390): a copy of a topic set to
    # zstd level 19 should not silently compress at level 3.
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "max.message.bytes",
    "message.timestamp.type",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
})

LocalPolicy = Literal["overwrite", "keep_target", "report_only"]
LOCAL_POLICIES: tuple[str, ...] = get_args(LocalPolicy)

#: Why a key of a follower's topic gets the verdict it gets.
Why = Literal["owner_changed", "differs", "local_overwritten", "local_kept", "local_reported"]


@dataclass(frozen=True)
class ConfigOwnership:
    """Which cluster owns each topic's travelling configs, which keys stay local, and the local-change policy.

    ``owners``: ``(topic regex, cluster)`` pairs, the first full match wins;
    ``default_owner`` owns every other topic. ``exclude``: keys each cluster keeps
    for itself (never compared, never copied, also not when a topic is created).
    """

    default_owner: str
    owners: tuple[tuple[str, str], ...] = ()
    exclude: frozenset[str] = frozenset()
    on_local_change: LocalPolicy = "overwrite"
    _compiled: tuple[tuple[re.Pattern[str], str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.on_local_change not in LOCAL_POLICIES:
            raise ValueError(f"on_local_change must be one of {', '.join(LOCAL_POLICIES)}, "
                             f"got {self.on_local_change!r}")
        object.__setattr__(self, "_compiled", tuple((re.compile(p), c) for p, c in self.owners))

    def owner_of(self, topic: str) -> str:
        return next((cluster for pattern, cluster in self._compiled if pattern.fullmatch(topic)), self.default_owner)

    def clusters(self) -> set[str]:
        """Every cluster that owns some topic's configs."""
        return {self.default_owner, *(c for _, c in self.owners)}

    def to_dict(self) -> dict[str, Any]:
        return {"default_owner": self.default_owner, "owners": [list(o) for o in self.owners],
                "exclude": sorted(self.exclude), "on_local_change": self.on_local_change}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfigOwnership:
        return cls(default_owner=str(data["default_owner"]),
                   owners=tuple((str(p), str(c)) for p, c in data.get("owners") or ()),
                   exclude=frozenset(str(k) for k in data.get("exclude") or ()),
                   on_local_change=data.get("on_local_change", "overwrite"))


@dataclass(frozen=True)
class KeyVerdict:
    """One travelling key of a follower's topic that differs from the owner's (``None``: not set explicitly)."""

    key: str
    owner_value: str | None
    target_value: str | None
    #: ``set``/``delete``: the owner's value is applied (``delete``: the owner leaves it to its broker);
    #: ``keep``/``report``: the follower's value stays.
    action: Literal["set", "delete", "keep", "report"]
    why: Why

    @property
    def applies(self) -> bool:
        return self.action in ("set", "delete")

    def explain(self, topic: str, owner: str, target: str) -> str:
        values = f"{self.key}: {_shown(self.target_value)} on {target}, {_shown(self.owner_value)} on the owner {owner}"
        return {
            "owner_changed": f"{topic} {values}; {target} still held what mirrorflow applied, so the owner "
                             "changed it: applied",
            "differs": f"{topic} {values}: the owner's value applied (topic_configs.on_local_change: overwrite)",
            "local_overwritten": f"{topic} {values}; changed on {target} (not what mirrorflow applied there): "
                                 "the owner's value wins (topic_configs.on_local_change: overwrite)",
            "local_kept": f"{topic} {values}; changed on {target}: kept (topic_configs.on_local_change: keep_target)",
            "local_reported": f"{topic} {values}; changed on {target}: left as it is and reported "
                              "(topic_configs.on_local_change: report_only)",
        }[self.why]


def _shown(value: str | None) -> str:
    return "(broker default)" if value is None else repr(value)


@dataclass(frozen=True)
class TopicVerdict:
    """What becomes of one follower topic's configs, and the record mirrorflow keeps of it afterwards."""

    topic: str
    owner: str
    target: str
    keys: tuple[KeyVerdict, ...]
    #: The owner's values (excluded keys left out) this verdict aligns the follower with.
    owner_values: Mapping[str, str]
    #: Keys the follower keeps or reports, with its values (``None``: not set there).
    local: Mapping[str, str | None]
    #: The record read before deciding (``None``: none, or not read).
    previous: Mapping[str, Any] | None = None

    @property
    def to_set(self) -> dict[str, str]:
        return {k.key: k.owner_value for k in self.keys if k.action == "set" and k.owner_value is not None}

    @property
    def to_delete(self) -> tuple[str, ...]:
        return tuple(k.key for k in self.keys if k.action == "delete")

    @property
    def newly_local(self) -> tuple[KeyVerdict, ...]:
        """Kept or reported keys whose local value is new since the last record (audited once, not every run)."""
        before = dict((self.previous or {}).get("local") or {})
        return tuple(k for k in self.keys if not k.applies
                     and (k.key not in before or before[k.key] != k.target_value))

    def record(self) -> dict[str, Any]:
        """What to remember on the follower: the owner's values as applied, and the keys it keeps."""
        return record(self.owner, self.owner_values, self.local)

    @property
    def record_changed(self) -> bool:
        previous = self.previous or {}
        return (previous.get("owner") != self.owner or dict(previous.get("applied") or {}) != dict(self.owner_values)
                or dict(previous.get("local") or {}) != dict(self.local))


def record(owner: str, applied: Mapping[str, str], local: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """A follower topic's record (:mod:`mirrorflow.kafka.config_memory`): whose values it holds, and its own."""
    return {"owner": owner, "applied": dict(sorted(applied.items())), "local": dict(sorted((local or {}).items()))}


def decide(topic: str, owner: str, target: str, owner_values: Mapping[str, str], target_values: Mapping[str, str],
           record: Mapping[str, Any] | None, policy: LocalPolicy,
           same: Callable[[str, str | None, str | None], bool] | None = None) -> TopicVerdict:
    """The verdict for one follower topic: which keys follow the owner, which stay, and why.

    ``owner_values`` and ``target_values`` are the explicitly set travelling configs
    (excluded keys already left out); ``record`` is what mirrorflow remembered of
    this topic on ``target`` (``None``: nothing). ``same`` compares two values of a
    key (``cleanup.policy`` is a set); plain equality by default.
    """
    equal = same or (lambda _key, a, b: a == b)
    applied = dict(record.get("applied") or {}) if record is not None else None
    keys: list[KeyVerdict] = []
    local: dict[str, str | None] = {}
    for key in sorted(set(owner_values) | set(target_values)):
        wanted, have = owner_values.get(key), target_values.get(key)
        if equal(key, wanted, have):
            continue
        owner_changed = applied is not None and equal(key, have, applied.get(key))
        unset = applied is None and have is None  # nothing of the follower's own to spare
        if owner_changed or unset or policy == "overwrite":
            action: Literal["set", "delete", "keep", "report"] = "set" if wanted is not None else "delete"
            why: Why = "owner_changed" if owner_changed else "local_overwritten" if applied is not None else "differs"
            keys.append(KeyVerdict(key, wanted, have, action, why))
        elif policy == "keep_target":
            keys.append(KeyVerdict(key, wanted, have, "keep", "local_kept"))
            local[key] = have
        else:
            keys.append(KeyVerdict(key, wanted, have, "report", "local_reported"))
            local[key] = have
    return TopicVerdict(topic, owner, target, tuple(keys), dict(owner_values), local, record)
