"""Whose topic configs win, and what becomes of a follower's value that differs from the owner's.

In a tree every cluster writes the same topics, so "give the target the source's
configs" would let two clusters overwrite each other run after run. Instead one
cluster **owns** each topic's travelling configs (topology key ``topic_configs``;
by default the first cluster listed): every other cluster follows it, and nothing
a follower sets ever travels on. Nothing can flip back and forth, because only
one cluster's values are ever copied.

A follower's value that differs from the owner's has one of two histories, told
apart by the record of what the sync last saw there (kept on the follower by
:mod:`mirrorflow.cluster_sync.config_memory`, under every policy):

- the follower still holds the owner's value of that time: **the owner changed**,
  and the owner's new value is applied, a shorter retention included: that is
  what the sync is for;
- it holds something else, or the key was already its own: **the follower's own
  value**, and the policy decides: the owner's value overwrites it (``overwrite``,
  the default), it is kept (``keep_target``), or it is left and reported every run
  (``report_only``). A key the follower leaves to its broker has no value of its own
  to spare: the owner's value arrives under every policy.

Three things are never acted on silently (docs/topics.md, "Safe by default"):

- **Keeping less.** Changing a follower's own value never makes it keep less
  data (a lower or removed ``retention.ms``/``retention.bytes``, a ``cleanup.policy``
  that gains ``delete`` or ``compact``) unless ``topic_configs.allow_keeping_less``
  names the key (or is ``true``): the change is declined and reported every run.
- **A first look.** A follower topic the sync has no record of (an upgrade, a topic
  made by hand) is only reported in its first run; its values become the baseline.
- **A new owner.** A record written under another owner (``owner``/``owners``
  changed, or the ``clusters`` order did) proves nothing about this owner's values:
  that run reports only, loudly, and starts a new baseline.

:func:`decide` is pure and each verdict explains itself, as :mod:`mirrorflow.copyflags` does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from mirrorflow.kafka import KEEPING_CONFIGS

LocalPolicy = Literal["overwrite", "keep_target", "report_only"]
LOCAL_POLICIES: tuple[str, ...] = get_args(LocalPolicy)

#: Why a key of a follower's topic gets the verdict it gets.
Why = Literal["owner_changed", "unset", "first_look", "owner_moved", "keeps_less", "local_overwritten",
              "local_kept", "local_reported"]



def _limit(value: str) -> float:
    number = int(value)
    return float("inf") if number < 0 else float(number)  # -1: no limit


def _policies(value: str) -> set[str]:
    return {p.strip() for p in value.split(",") if p.strip()}


def keeps_less(key: str, before: str | None, after: str | None) -> bool:
    """Whether a topic would keep less data with ``after`` than with ``before`` (effective values).

    Retention lower than before (``-1`` is no limit), or a cleanup policy that gains
    ``delete`` (retention starts deleting) or ``compact`` (superseded records go). An
    unknown side (``None``) or a value that does not parse counts as keeping less:
    the safe answer when nobody can tell.
    """
    if key not in KEEPING_CONFIGS:
        return False
    if before is None or after is None:
        return True
    try:
        if key == "cleanup.policy":
            return bool(_policies(after) - _policies(before))
        return _limit(after) < _limit(before)
    except ValueError:
        return True


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
    #: Keys a sync may change on a follower's own value although it then keeps less data (:func:`keeps_less`).
    allow_keeping_less: frozenset[str] = frozenset()
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
                "exclude": sorted(self.exclude), "on_local_change": self.on_local_change,
                "allow_keeping_less": sorted(self.allow_keeping_less)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfigOwnership:
        return cls(default_owner=str(data["default_owner"]),
                   owners=tuple((str(p), str(c)) for p, c in data.get("owners") or ()),
                   exclude=frozenset(str(k) for k in data.get("exclude") or ()),
                   on_local_change=data.get("on_local_change", "overwrite"),
                   allow_keeping_less=frozenset(str(k) for k in data.get("allow_keeping_less") or ()))


@dataclass(frozen=True)
class KeyVerdict:
    """One travelling key of a follower's topic that differs from the owner's (``None``: not set explicitly)."""

    key: str
    owner_value: str | None
    target_value: str | None
    #: ``set``/``delete``: the owner's value is applied (``delete``: the owner leaves it to its broker);
    #: ``keep``/``report``: the follower's value stays; ``decline``: applying it was refused and is reported.
    action: Literal["set", "delete", "keep", "report", "decline"]
    why: Why
    #: For ``first_look``/``owner_moved``: the owner the last record names (``None``: no record).
    was_owner: str | None = None

    @property
    def applies(self) -> bool:
        return self.action in ("set", "delete")

    @property
    def change(self) -> str:
        """The change as it would be made: ``set key=value`` or ``remove key``."""
        return f"remove {self.key}" if self.owner_value is None else f"set {self.key}={self.owner_value}"

    def explain(self, topic: str, owner: str, target: str) -> str:
        values = f"{self.key}: {_shown(self.target_value)} on {target}, {_shown(self.owner_value)} on the owner {owner}"
        return {
            "owner_changed": f"{topic} {values}; {target} still held what mirrorflow applied, so the owner "
                             "changed it: applied",
            "unset": f"{topic} {values}; {target} leaves it to its broker: the owner's value applied",
            "first_look": f"{topic} {values}; the first time the sync sees this topic on {target}: reported "
                          f"only, nothing changed; from the next run it counts as changed on {target}",
            "owner_moved": f"{topic} {values}; the config owner changed from {self.was_owner} to {owner} since "
                           "the last run (topic_configs.owner/owners, or the clusters order): reported only, "
                           f"nothing changed; from the next run it counts as changed on {target}",
            "keeps_less": f"{topic} {values}; {target}'s own value, and the owner's would make {target} keep "
                          f"less data: declined, left as it is (topic_configs.allow_keeping_less: [{self.key}] "
                          "allows it)",
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
    """A follower topic's record (:mod:`mirrorflow.cluster_sync.config_memory`): whose values it holds, and its own."""
    return {"owner": owner, "applied": dict(sorted(applied.items())), "local": dict(sorted((local or {}).items()))}


def decide(topic: str, owner: str, target: str, owner_values: Mapping[str, str], target_values: Mapping[str, str],
           record: Mapping[str, Any] | None, policy: LocalPolicy,
           same: Callable[[str, str | None, str | None], bool] | None = None, *,
           defaults: Mapping[str, str | None] | None = None,
           allow_keeping_less: frozenset[str] = frozenset()) -> TopicVerdict:
    """The verdict for one follower topic: which keys follow the owner, which stay, and why.

    ``owner_values`` and ``target_values`` are the explicitly set travelling configs
    (excluded keys already left out); ``record`` is what the sync last saw of this
    topic on ``target`` (``None``: nothing: a first look). ``defaults``: the value each
    :data:`KEEPING_CONFIGS` key takes on ``target`` when the topic does not set it
    (its broker's), to tell whether removing a key keeps less. ``same`` compares two
    values of a key (``cleanup.policy`` is a set); plain equality by default.
    """
    equal = same or (lambda _key, a, b: a == b)
    known = dict(defaults or {})
    was_owner = str(record.get("owner")) if record is not None and record.get("owner") is not None else None
    moved = record is not None and was_owner != owner
    applied = dict(record.get("applied") or {}) if record is not None and not moved else {}
    own_before = set((record or {}).get("local") or {}) if not moved else set()
    keys: list[KeyVerdict] = []
    local: dict[str, str | None] = {}
    for key in sorted(set(owner_values) | set(target_values)):
        wanted, have = owner_values.get(key), target_values.get(key)
        if equal(key, wanted, have):
            continue
        if record is None or moved:  # nothing proves whose value the follower holds: say, change nothing
            keys.append(KeyVerdict(key, wanted, have, "report", "owner_moved" if moved else "first_look",
                                   was_owner))
            if have is not None:
                local[key] = have
            continue
        if key not in own_before and equal(key, have, applied.get(key)):  # still the owner's previous value
            keys.append(KeyVerdict(key, wanted, have, "set" if wanted is not None else "delete", "owner_changed"))
            continue
        if have is not None and policy == "keep_target":
            keys.append(KeyVerdict(key, wanted, have, "keep", "local_kept"))
            local[key] = have
        elif have is not None and policy == "report_only":
            keys.append(KeyVerdict(key, wanted, have, "report", "local_reported"))
            local[key] = have
        elif key not in allow_keeping_less and keeps_less(key, have if have is not None else known.get(key),
                                                          wanted if wanted is not None else known.get(key)):
            keys.append(KeyVerdict(key, wanted, have, "decline", "keeps_less"))
            local[key] = have
        else:  # overwrite, or a key the follower leaves to its broker: nothing of its own to spare
            keys.append(KeyVerdict(key, wanted, have, "set" if wanted is not None else "delete",
                                   "local_overwritten" if have is not None else "unset"))
    return TopicVerdict(topic, owner, target, tuple(keys), dict(owner_values), local, record)
