"""The one model of a registry's state: its ``_schemas`` records, key by key.

Confluent Schema Registry and Karapace keep their whole state in a compacted,
single-partition topic (``_schemas``) whose keys and values are JSON. The
latest value per key *is* the registry's state, so mirrorflow models a
registry as exactly that map, whichever way it was read (the topic, or the
REST API translated into the same records). One model means one diff, one
conflict rule and one audit format for both ways in.

Key types kept (others, such as ``NOOP``, are the registry's own bookkeeping):

==================  ===============================  ==============================================
keytype             key fields                       value
==================  ===============================  ==============================================
``SCHEMA``          subject, version (magic 1)       subject, version, id, schema, schemaType,
                                                     references, deleted (+ metadata, ruleSet)
``CONFIG``          subject or null (global)         compatibilityLevel (+ other config fields)
``MODE``            subject or null (global)         mode
``DELETE_SUBJECT``  subject                          subject, version (soft delete up to version)
``CLEAR_SUBJECT``   subject                          subject (hard delete of soft-deleted versions)
==================  ===============================  ==============================================

A value of ``None`` is a tombstone: a hard-deleted version, a removed config or mode.

Keys are written byte for byte as the registries write them (field order
keytype, subject, version, magic; no spaces), because compaction and the
registries' readers match keys as bytes: a differently spelled key would be
a second record instead of an update.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"
KEYTYPES = (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT)
#: Written by registries for their own reader synchronisation; never state.
IGNORED_KEYTYPES = frozenset({NOOP})

DEFAULT_SCHEMA_TYPE = "AVRO"

Value = dict[str, Any] | None


class RecordError(ValueError):
    """A ``_schemas`` record that cannot be understood; carries what was wrong."""


@dataclass(frozen=True, order=True)
class Key:
    """A registry state key; ``subject`` is ``None`` for the global config and mode."""

    keytype: str
    subject: str | None
    version: int | None = None

    def to_bytes(self) -> bytes:
        fields: dict[str, Any] = {"keytype": self.keytype}
        if self.keytype != NOOP:
            fields["subject"] = self.subject
        if self.keytype == SCHEMA:
            fields["version"] = self.version
        fields["magic"] = 1 if self.keytype == SCHEMA else 0
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes | None) -> Key:
        if raw is None:
            raise RecordError("record has no key")
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise RecordError(f"key is not JSON: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("keytype"), str):
            raise RecordError(f"key has no keytype: {raw[:200]!r}")
        keytype = data["keytype"]
        subject = data.get("subject")
        if keytype in IGNORED_KEYTYPES or keytype not in KEYTYPES:
            return cls(keytype, subject if isinstance(subject, str) else None)
        if subject is not None and not isinstance(subject, str):
            raise RecordError(f"{keytype} key has a non-string subject: {raw[:200]!r}")
        if keytype in (SCHEMA, DELETE_SUBJECT, CLEAR_SUBJECT) and subject is None:
            raise RecordError(f"{keytype} key has no subject: {raw[:200]!r}")
        version = data.get("version")
        if keytype == SCHEMA and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
            raise RecordError(f"SCHEMA key has no valid version: {raw[:200]!r}")
        return cls(keytype, subject, version if keytype == SCHEMA else None)

    @property
    def kept(self) -> bool:
        """Whether this key is registry state (not bookkeeping such as NOOP)."""
        return self.keytype in KEYTYPES

    def describe(self) -> str:
        where = "global" if self.subject is None else repr(self.subject)
        return f"{self.keytype} {where}" + (f" version {self.version}" if self.version is not None else "")


def decode_value(key: Key, raw: bytes | None) -> Value:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"{key.describe()}: value is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RecordError(f"{key.describe()}: value is not a JSON object")
    if key.keytype == SCHEMA:
        for field, kind in (("id", int), ("schema", str)):
            if not isinstance(value.get(field), kind):
                raise RecordError(f"{key.describe()}: value has no valid {field!r}")
    return value


def encode_value(value: Value) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- schema values


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


def schema_type(value: Mapping[str, Any]) -> str:
    return value.get("schemaType") or DEFAULT_SCHEMA_TYPE


def references(value: Mapping[str, Any]) -> tuple[Reference, ...]:
    return tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in value.get("references") or ())


def content(value: Mapping[str, Any]) -> tuple[str, str, tuple[Reference, ...]]:
    """What makes two registrations the same schema: type, normalised text, references.

    Registries may respace a schema they store (Confluent keeps Avro in its
    compact canonical form), so JSON-based schemas compare as parsed JSON;
    Protobuf text compares with surrounding whitespace stripped.
    """
    kind = schema_type(value)
    text = value["schema"]
    if kind in ("AVRO", "JSON"):
        try:
            text = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        except ValueError:
            text = text.strip()
    else:
        text = text.strip()
    return kind, text, references(value)


def same_registration(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Same id, same schema, same deleted flag: writing ``a`` over ``b`` would change nothing."""
    return a["id"] == b["id"] and bool(a.get("deleted")) == bool(b.get("deleted")) and content(a) == content(b)


#: Config fields that both ways in carry (the storage topic may hold more; REST shows these).
CONFIG_FIELDS = ("compatibilityLevel", "normalize", "alias", "compatibilityGroup", "validateFields")


def config_view(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A config value reduced to :data:`CONFIG_FIELDS`, so configs compare alike whichever way they were read."""
    if value is None:
        return None
    return {k: value[k] for k in CONFIG_FIELDS if value.get(k) is not None}


def same_value(keytype: str, a: Value, b: Value) -> bool:
    """Whether writing ``a`` where ``b`` is would change nothing."""
    if a is None or b is None:
        return a is None and b is None
    if keytype == "SCHEMA":
        return same_registration(a, b)
    if keytype == "CONFIG":
        return config_view(a) == config_view(b)
    return a == b


# --------------------------------------------------------------------------- the state


class RegistryState:
    """The latest value per key, tombstones included (``None``), in first-seen order."""

    def __init__(self, entries: Mapping[Key, Value] | None = None) -> None:
        self.entries: dict[Key, Value] = dict(entries or {})

    @classmethod
    def replay(cls, records: Iterable[tuple[bytes | None, bytes | None]]) -> RegistryState:
        """Apply raw ``(key, value)`` records in topic order; later records win."""
        state = cls()
        for raw_key, raw_value in records:
            key = Key.from_bytes(raw_key)
            if key.kept:
                state.entries[key] = decode_value(key, raw_value)
        return state

    def get(self, key: Key) -> Value:
        return self.entries.get(key)

    def __contains__(self, key: Key) -> bool:
        return key in self.entries

    def subjects(self) -> list[str]:
        """Every subject named by a key, in first-seen order."""
        seen: dict[str, None] = {}
        for key in self.entries:
            if key.subject is not None:
                seen.setdefault(key.subject)
        return list(seen)

    def keys_of(self, subject: str | None) -> list[Key]:
        return [k for k in self.entries if k.subject == subject]

    def by_id(self) -> dict[int, dict[str, Any]]:
        """Schema id -> one live registration holding it (ids are shared by subjects with the same schema)."""
        ids: dict[int, dict[str, Any]] = {}
        for key, value in self.entries.items():
            if key.keytype == SCHEMA and value is not None:
                ids.setdefault(value["id"], value)
        return ids
